package hostagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The host agent runs machines and keeps only host-local records: it never
// imports a store (or the control plane's packages that own records), and
// never names pandastack.Store, so that it can run on a host without the
// control plane's database.
func TestHostAgentImportsNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/store", "/internal/sandboxes", "/internal/api", "/internal/quotas", "/internal/templates/registry", "database/sql"} {
			if strings.Contains(p, banned) {
				t.Errorf("internal/hostagent depends on %s: the host agent keeps no control-plane records", p)
			}
		}
	}
	files, _ := filepath.Glob("*.go")
	sub, _ := filepath.Glob("*/*.go")
	for _, f := range append(files, sub...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "pandastack.Store") {
			t.Errorf("%s names pandastack.Store: the host agent must not use the control plane's store", f)
		}
	}
}
