package templates

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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

// Unused size variants go, with nothing else: not the builds, not a
// variant a live sandbox or snapshot came from, not one baked or handed
// out for a create a moment ago.
func TestCollectVariants(t *testing.T) {
	b := &Builder{cfg: Config{TemplateDir: t.TempDir()}, log: slog.New(slog.DiscardHandler), locks: map[string]*sync.Mutex{}}
	old := time.Now().Add(-time.Hour)
	mk := func(name, id, base string, at time.Time) {
		t.Helper()
		dir := b.dir(name, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeMeta(dir, meta{BaseID: base}); err != nil {
			t.Fatal(err)
		}
		if err := writeRecord(dir, record{Machine: vmm.Machine{CPUs: 1, MemoryMiB: 256}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(dir, "template.json"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	mk("base", "b1", "", old)            // a build
	mk("base", "unused", "b1", old)      // goes
	mk("base", "live", "b1", old)        // a live sandbox came from it
	mk("web", "snapped", "w1", old)      // a snapshot came from it
	mk("web", "fresh", "w1", time.Now()) // just baked
	mk("web", "taken", "w1", old)
	if !b.takeVariant("web", "taken") { // handed out for a create
		t.Fatal("takeVariant of a baked variant = false")
	}
	inUse := func(id string) bool { return id == "live" || id == "snapped" }
	removed, err := b.CollectVariants(t.Context(), inUse, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != "base@unused" {
		t.Fatalf("removed %v, want only base@unused", removed)
	}
	for _, d := range []string{"base/b1", "base/live", "web/snapped", "web/fresh", "web/taken"} {
		if _, err := os.Stat(filepath.Join(b.cfg.TemplateDir, d, "template.json")); err != nil {
			t.Errorf("%s was removed: %v", d, err)
		}
	}
	if b.takeVariant("base", "unused") {
		t.Fatal("a removed variant is still handed out: it must be baked again")
	}
}
