package templates

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pandastack/pandastack/internal/vmm"
	"golang.org/x/sys/unix"
)

// The image build steps leave is cached by the image they start from and
// the steps, in order: the same inputs find it, any change makes another.
func TestStepsKey(t *testing.T) {
	steps := []string{"npm install -g a@1.0.0", "ln -s x y"}
	key := stepsKey("base-1", steps)
	if got := stepsKey("base-1", slices.Clone(steps)); got != key {
		t.Fatalf("same base and steps: key %s, then %s", key, got)
	}
	for name, other := range map[string]string{
		"other base":        stepsKey("base-2", steps),
		"other version":     stepsKey("base-1", []string{"npm install -g a@1.0.1", "ln -s x y"}),
		"steps reordered":   stepsKey("base-1", []string{"ln -s x y", "npm install -g a@1.0.0"}),
		"a step fewer":      stepsKey("base-1", steps[:1]),
		"steps split again": stepsKey("base-1", []string{"npm install -g a@1.0.0 ln", "-s x y"}),
	} {
		if other == key {
			t.Errorf("%s: same key %s", name, key)
		}
	}
}

// The catalog's npm installs are build-VM steps, never host-chroot ones.
func TestCatalogNpmRunsInBuildVM(t *testing.T) {
	for name, def := range Catalog {
		for _, step := range def.Rootfs.Run {
			for _, tool := range []string{"npm", "npx", "curl", "wget", "pip", "git"} {
				if slices.Contains(splitWords(step), tool) {
					t.Errorf("template %s: host-chroot step %q runs %s: it belongs in Steps (a build VM)", name, step, tool)
				}
			}
		}
	}
	for _, name := range []string{"agent", "browser"} {
		if len(Catalog[name].Steps) == 0 {
			t.Errorf("template %s has no build-VM steps", name)
		}
	}
}

// splitWords splits a shell command at blanks and shell punctuation.
func splitWords(s string) []string {
	var out []string
	word := []rune{}
	for _, r := range s {
		switch r {
		case ' ', '\t', '\n', ';', '&', '|', '(', ')', '$', '`', '"', '\'':
			if len(word) > 0 {
				out = append(out, string(word))
				word = word[:0]
			}
		default:
			word = append(word, r)
		}
	}
	if len(word) > 0 {
		out = append(out, string(word))
	}
	return out
}

// A build VM directory a killed build left is swept; one whose build still
// runs (its lock held) is not.
func TestSweepStepDirs(t *testing.T) {
	dir := t.TempDir()
	left, live := filepath.Join(dir, ".steps-left"), filepath.Join(dir, ".steps-live")
	for _, d := range []string{left, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, vmm.DiskFile), []byte("disk"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".lock"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(live, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	sweepStepDirs(dir)
	if _, err := os.Stat(left); err == nil {
		t.Errorf("%s, left by a killed build, is still there", left)
	}
	if _, err := os.Stat(filepath.Join(live, vmm.DiskFile)); err != nil {
		t.Errorf("the running build's directory was swept: %v", err)
	}
}
