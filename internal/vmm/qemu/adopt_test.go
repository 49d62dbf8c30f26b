package qemu_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pandastack/pandastack/internal/vmm"
)

// A durable volume is restored in a pooled process too (adopt.go): the
// process takes the volume's own file, so the guest's writes reach the
// volume at its path and stay after the VM is killed; the file keeps its
// owner and mode.
func TestDurableVolumeInPooledProcess(t *testing.T) {
	var vol string
	v := restoreVolumeInPool(t, func(dir string) vmm.VolumeFile {
		vol = filepath.Join(dir, "volumes", "vol0.raw") // on the VMs' filesystem, as a host keeps volumes
		writeVolume(t, vol, 0o600)
		return vmm.VolumeFile{Path: vol}
	})
	if err := v.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(vol)
	if err != nil || !strings.HasPrefix(string(b), "changed") {
		t.Fatalf("the guest's write did not reach the volume's file: %q %v", b[:12], err)
	}
	st, err := os.Stat(vol)
	if err != nil || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatalf("the volume's file after the restore: %v %v", st.Mode(), err)
	}
}

// writeVolume writes a 32 MiB volume file at path that starts with
// "volume bytes".
func writeVolume(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("volume bytes"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 32<<20); err != nil {
		t.Fatal(err)
	}
}

// restoreVolumeInPool restores the template in a process a new driver
// pooled for it, with the volume file volume makes (given the VMs' dir; a
// writeVolume file) as its first volume, and checks that the pooled
// process took the restore and that the guest sees the volume at 32 MiB,
// reads "volume bytes" from it and writes "changed" over it.
func restoreVolumeInPool(t *testing.T, volume func(dir string) vmm.VolumeFile) vmm.VM {
	t.Helper()
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	t.Cleanup(func() { d.Close() })
	d.Prewarm(s, 1)
	waitPool(t, d, s.Key, 1)
	pooled := map[int]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), dir+"/") {
			pid, _ := strconv.Atoi(e.Name())
			pooled[pid] = true
		}
	}
	s.Volumes[0] = volume(dir)
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	if !pooled[v.PID()] {
		t.Fatalf("the restore did not take the pooled process (pid %d, pooled %v)", v.PID(), pooled)
	}
	cl := agent(t, v)
	if got := guestShUntil(t, cl, blockDevices, "vol0 65536\n"); !strings.Contains(got, "vol0 65536\n") {
		t.Fatalf("guest block devices:\n%s\nwant vol0 at 32 MiB", got)
	}
	script := `d=$(grep -l vol0 /sys/block/vd*/serial); d=${d%/serial}; head -c 12 /dev/${d##*/}; echo; printf changed | dd of=/dev/${d##*/} conv=notrunc,fsync 2>/dev/null; head -c 7 /dev/${d##*/}`
	if got := guestShUntil(t, cl, script, "changed"); got != "volume bytes\nchanged" {
		t.Fatalf("the volume in the guest reads %q", got)
	}
	return v
}
