package server

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/cowfs"
)

func mountedAt(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && fs[4] == dir {
			return true
		}
	}
	return false
}

// A server that refuses to start after it has mounted its VM storage (here:
// a data dir under a mode-0700 directory, which the VMs' uids cannot
// traverse) says why and leaves no loop mount behind.
func TestFailedStartLeavesNoMount(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the VM storage is a loop-mounted XFS image")
	}
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(home, "data")
	agent := buildProgram(t, "pandastack-guest", "0")
	_, err := Open(context.Background(), Config{DataDir: data, AgentPath: agent, Accel: "tcg", NoNetwork: true,
		StorageSize: 1 << 30})
	cow := filepath.Join(data, "cow")
	if mountedAt(cow) {
		t.Errorf("a failed start left %s mounted", cow)
		if uerr := cowfs.Unmount(cow); uerr != nil {
			t.Error(uerr)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "mode -rwx------") {
		t.Fatalf("start under a 0700 directory: %v, want an error naming the mode", err)
	}
}
