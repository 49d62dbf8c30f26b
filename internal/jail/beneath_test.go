package jail_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pandastack/pandastack/internal/jail"
)

// A VM directory a compromised VMM could write: the server opening files in
// it must not be led outside by links.
func TestOpenBeneathRefusesLinksOutOfTheDirectory(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "admin-key")
	if err := os.WriteFile(secret, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "mem.raw"), []byte("guest ram"), 0o600))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o700))
	must(os.WriteFile(filepath.Join(dir, "sub", "vol0.raw"), []byte("vol"), 0o600))
	must(os.Symlink(secret, filepath.Join(dir, "disk.raw")))                    // absolute link out
	must(os.Symlink("../"+filepath.Base(outside), filepath.Join(dir, "up")))    // relative link out
	must(os.Symlink("mem.raw", filepath.Join(dir, "inside-link")))              // a link, even within
	must(os.Symlink(outside, filepath.Join(dir, "subdir-link")))                // a directory link
	must(os.Symlink("/proc/self/root/etc/passwd", filepath.Join(dir, "magic"))) // via /proc

	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"mem.raw", true},
		{"sub/vol0.raw", true},
		{"disk.raw", false},
		{"up/admin-key", false},
		{"inside-link", false},
		{"subdir-link/admin-key", false},
		{"magic", false},
		{"../" + filepath.Base(outside) + "/admin-key", false},
		{secret, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := jail.OpenBeneath(dir, tc.name, os.O_RDONLY, 0)
			if tc.ok {
				if err != nil {
					t.Fatalf("open %s: %v", tc.name, err)
				}
				f.Close()
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("open %s: followed a link out of the directory", tc.name)
			}
			if !errors.Is(err, jail.ErrEscape) {
				t.Fatalf("open %s: %v, want ErrEscape", tc.name, err)
			}
		})
	}
	// Creating through a dangling link must not create the target either.
	must(os.Symlink(filepath.Join(outside, "planted"), filepath.Join(dir, "serial.log")))
	if f, err := jail.OpenBeneath(dir, "serial.log", os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		f.Close()
		t.Fatal("created a file through a link")
	}
	if _, err := os.Lstat(filepath.Join(outside, "planted")); err == nil {
		t.Fatal("a file was created outside the directory")
	}
	if _, err := jail.ReadFileBeneath(dir, "disk.raw", 1<<20); err == nil {
		t.Fatal("ReadFileBeneath followed a link")
	}
	if b, err := jail.ReadFileBeneath(dir, "mem.raw", 1<<20); err != nil || string(b) != "guest ram" {
		t.Fatalf("ReadFileBeneath = %q, %v", b, err)
	}
}
