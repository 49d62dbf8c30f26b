package templates

import (
	"os"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// A template build may have at most MaxSizeVariants size variants: past
// that a new size is quota_exceeded and the answer lists the sizes that
// exist; other builds and unfinished bakes do not count.
func TestSizeVariantsAreBounded(t *testing.T) {
	b := &Builder{cfg: Config{TemplateDir: t.TempDir(), MaxSizeVariants: 2}}
	variant := func(id, base string, cpus, mem int, done bool) {
		t.Helper()
		dir := b.dir("base", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeMeta(dir, meta{BaseID: base}); err != nil {
			t.Fatal(err)
		}
		if done {
			if err := writeRecord(dir, record{Machine: vmm.Machine{CPUs: cpus, MemoryMiB: mem}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(b.dir("base", "b1"), 0o755); err != nil {
		t.Fatal(err)
	}
	variant("v1", "b1", 1, 1024, true)
	variant("other", "b2", 1, 2048, true) // another build's
	variant("half", "b1", 2, 4096, false) // a bake that did not finish
	if err := b.checkVariants("base", "b1"); err != nil {
		t.Fatalf("one variant of two allowed: %v", err)
	}
	variant("v2", "b1", 2, 2048, true)
	err := b.checkVariants("base", "b1")
	if pandastack.ErrorCode(err) != pandastack.EQuota || !strings.Contains(pandastack.ErrorMessage(err), "template base has 2 size variants") ||
		!strings.Contains(pandastack.ErrorMessage(err), "1 cpus, 1024 MiB; 2 cpus, 2048 MiB") {
		t.Fatalf("a third variant = %v, want quota_exceeded listing the two sizes", err)
	}
	if err := b.checkVariants("base", "b2"); err != nil {
		t.Fatalf("another build's variants: %v", err)
	}
	b.cfg.MaxSizeVariants = -1
	if err := b.checkVariants("base", "b1"); err != nil {
		t.Fatalf("no bound: %v", err)
	}
}
