package jail_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pandastack/pandastack/internal/jail"
)

// A jailed cold boot needs its disk's whole backing chain bound in, and
// nothing named by a json: "file".
func TestBackingChain(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img (qemu-utils) is not installed")
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(base, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	img := func(name, backing, format string) string {
		p := filepath.Join(dir, name)
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", format, "-b", backing, p).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create %s: %v %s", name, err, out)
		}
		return p
	}
	mid := img("mid.qcow2", base, "raw")
	top := img("top.qcow2", "mid.qcow2", "qcow2") // relative: resolved beside the image
	for _, tc := range []struct {
		image string
		want  []string
	}{{base, nil}, {mid, []string{base}}, {top, []string{mid, base}}} {
		got, err := jail.BackingChain(tc.image)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("BackingChain(%s) = %v, %v; want %v", filepath.Base(tc.image), got, err, tc.want)
		}
	}
	bad := img("bad.qcow2", `json:{"file":{"driver":"file","filename":"/etc/shadow"}}`, "raw")
	if got, err := jail.BackingChain(bad); err == nil {
		t.Errorf("a json: backing file was accepted: %v", got)
	}
}
