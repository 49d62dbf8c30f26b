package hostagent

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVolumeFormat: a new volume, the smallest a database takes
// included, is ext4 with project quotas tracked in 256-byte inodes, so
// the guest can mount it with prjquota and a database can keep its WAL's
// room from its tables (databases/walroom.go).
func TestVolumeFormat(t *testing.T) {
	if _, err := exec.LookPath("dumpe2fs"); err != nil {
		t.Fatalf("dumpe2fs (e2fsprogs) is needed: %v", err)
	}
	a := &Agent{}
	for _, mib := range []int64{128, 1024} {
		file := filepath.Join(t.TempDir(), "vol.img")
		if err := a.makeVolumeFile(context.Background(), file, mib<<20); err != nil {
			t.Fatalf("%d MiB: %v", mib, err)
		}
		out, err := exec.Command("dumpe2fs", "-h", file).CombinedOutput()
		if err != nil {
			t.Fatalf("dumpe2fs: %v\n%s", err, out)
		}
		var features, inode string
		for _, l := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(l, ":")
			switch strings.TrimSpace(k) {
			case "Filesystem features":
				features = " " + strings.TrimSpace(v) + " "
			case "Inode size":
				inode = strings.TrimSpace(v)
			}
		}
		for _, f := range []string{"quota", "project"} {
			if !strings.Contains(features, " "+f+" ") {
				t.Errorf("%d MiB volume: no %s feature in %q", mib, f, features)
			}
		}
		if inode != "256" {
			t.Errorf("%d MiB volume: inode size %q, want 256", mib, inode)
		}
	}
}
