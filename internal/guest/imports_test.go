package guest

import (
	"os/exec"
	"strings"
	"testing"
)

// The guest agent runs in every VM: it stays small, static and free of the
// server's dependencies. This pins what it may import.
func TestAgentImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		"github.com/pandastack/pandastack/cmd/pandastack-guest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := []string{
		"github.com/pandastack/pandastack",
		"github.com/pandastack/pandastack/cmd/pandastack-guest",
		"github.com/pandastack/pandastack/internal/guest",
		"github.com/pandastack/pandastack/internal/guestproto",
		"github.com/hashicorp/yamux",
		"golang.org/x/sys/",
	}
	for _, dep := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			if dep == a || (strings.HasSuffix(a, "/") && strings.HasPrefix(dep, a)) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("the guest agent imports %s", dep)
		}
	}
	std, err := exec.Command("go", "list", "-deps", "github.com/pandastack/pandastack/cmd/pandastack-guest").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"net/http", "database/sql", "os/exec"} {
		for _, dep := range strings.Fields(string(std)) {
			if dep == banned {
				t.Errorf("the guest agent imports %s", banned)
			}
		}
	}
}
