package qemu

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/vmm"
	"golang.org/x/sys/unix"
)

// A pooled process has placeholders open in its volume slots, so a
// restore with a durable volume used to start a QEMU of its own (the
// volume must be the file the VM writes). adoptVolume lets a pooled
// process take one instead: the volume's blocks are cloned into the
// placeholder the process holds open (reflink, no data copied), the
// placeholder and the volume's file are exchanged and the directory
// synced, so from then on the process writes the volume's own file, as
// one started on it would. Until the exchange the volume's file is as
// it was; after it, its content is the same blocks: a failure at any step
// loses nothing.

// adoptable reports whether every durable volume of snap is on the
// filesystem of the VM directories (an exchange cannot cross them).
func (d *Driver) adoptable(snap vmm.Snapshot) bool {
	var dirStat unix.Stat_t
	if err := unix.Stat(d.cfg.Dir, &dirStat); err != nil {
		return false
	}
	for _, f := range snap.Volumes {
		if f.Path == "" || f.Copy {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(filepath.Dir(f.Path), &st); err != nil || st.Dev != dirStat.Dev {
			return false
		}
	}
	return true
}

// adoptVolume makes the placeholder v holds open in slot i durable
// volume path (see above). The placeholder is opened without following
// links and must stay the file that was cloned into: the volume's name
// never ends up on anything else.
func (v *vm) adoptVolume(i int, path string) error {
	fail := func(err error) error { return fmt.Errorf("adopt volume %s: %w", path, err) }
	ph := filepath.Join(v.dir, vmm.VolumeFileName(i))
	src, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fail(err)
	}
	fd, err := unix.Open(ph, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	dst := os.NewFile(uintptr(fd), ph)
	defer dst.Close()
	var pst unix.Stat_t
	if err := unix.Fstat(fd, &pst); err != nil || pst.Mode&unix.S_IFMT != unix.S_IFREG {
		return fail(fmt.Errorf("placeholder is not a regular file (%v)", err))
	}
	if err := unix.IoctlFileClone(fd, int(src.Fd())); err != nil {
		return fail(err)
	}
	// The volume's file keeps its owner and mode (the host's, not the
	// VM's uid: another VM may get that uid later).
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return fail(err)
	}
	if err := unix.Fchmod(fd, st.Mode&0o777); err != nil {
		return fail(err)
	}
	if err := dst.Sync(); err != nil {
		return fail(err)
	}
	// Exchanged, not renamed over: the volume's old file stays (under
	// the placeholder's name) until the new one is checked.
	if err := unix.Renameat2(unix.AT_FDCWD, ph, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE); err != nil {
		return fail(err)
	}
	var after unix.Stat_t
	if err := unix.Lstat(path, &after); err != nil || after.Ino != pst.Ino || after.Dev != pst.Dev {
		_ = unix.Renameat2(unix.AT_FDCWD, ph, unix.AT_FDCWD, path, unix.RENAME_EXCHANGE)
		return fail(fmt.Errorf("the exchanged file is not the one cloned into (%v)", err))
	}
	if err := cowfs.Fsync(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	_ = os.Remove(ph) // the volume's old file: its blocks are the new one's
	v.vols[i], v.copies[i] = path, false
	return nil
}
