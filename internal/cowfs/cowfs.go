// Package cowfs owns the copy-on-write filesystem that holds every VM's
// memory and disk files. Snapshots, forks, hibernation and restores copy
// those files by reflink (FICLONE): a clone shares every block with its
// source and costs a fraction of a millisecond, plus the writeback of pages
// the source still has dirty. When the data directory's own filesystem
// cannot reflink (ext4), Open makes an XFS filesystem (reflink=1) in a sparse
// image file next to it and mounts it through a loop device.
package cowfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Options configures Open.
type Options struct {
	// Size is the size of the XFS image when one has to be made; 0 picks
	// the free space of the filesystem under it, at most 1 TiB. The image is
	// sparse: it takes host disk only as it fills.
	Size   int64
	Logger *slog.Logger
	// LoopDirectIO makes a loop device Open mounts read and write the
	// image with direct I/O (loopDirectIO): more VMs fit in the host's
	// memory, at the price of forks, hibernations and read-aheads that go
	// to the disk instead of the image's cache (BENCHMARKS.md, session 17).
	LoopDirectIO bool
}

// FS is a directory on a filesystem that can reflink.
type FS struct {
	dir   string
	image string // the loop-mounted image, if one was needed
}

// Open makes dir a directory on a reflink-capable filesystem: dir itself if
// its filesystem can already clone, otherwise an XFS image dir+".img"
// mounted on dir (made and mounted on first use; mounted again after a
// reboot). Mounting needs root.
func Open(ctx context.Context, dir string, opt Options) (*FS, error) {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("cowfs: create %s: %w", dir, err)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if Supported(dir) {
		return &FS{dir: dir}, nil
	}
	img := dir + ".img"
	if mounted(dir) {
		return nil, fmt.Errorf("cowfs: %s is a mount point without reflink support", dir)
	}
	if os.Getuid() != 0 {
		return nil, fmt.Errorf("cowfs: %s cannot reflink (FICLONE) and mounting an XFS image needs root: run as root, or put the data directory on XFS (reflink=1) or btrfs", dir)
	}
	if _, err := os.Stat(img); errors.Is(err, os.ErrNotExist) {
		size := opt.Size
		if size == 0 {
			size = defaultSize(filepath.Dir(dir))
		}
		if err := makeImage(ctx, img, size); err != nil {
			return nil, err
		}
		log.Info("made copy-on-write filesystem", "image", img, "size_gib", size>>30)
	}
	if out, err := exec.CommandContext(ctx, "mount", "-t", "xfs", "-o", "loop,noatime", img, dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cowfs: mount %s on %s: %v: %s", img, dir, err, strings.TrimSpace(string(out)))
	}
	_ = os.Chmod(dir, 0o711)
	if opt.LoopDirectIO {
		if err := loopDirectIO(dir); err != nil {
			log.Warn("copy-on-write filesystem: loop device without direct I/O", "err", err)
		}
	}
	if !Supported(dir) {
		Unmount(dir)
		return nil, fmt.Errorf("cowfs: %s mounted but cannot reflink", dir)
	}
	return &FS{dir: dir, image: img}, nil
}

// Dir is the filesystem's directory.
func (f *FS) Dir() string { return f.dir }

// Close unmounts the image if this Open mounted it (an image found already
// mounted, or a directory that reflinks by itself, stays). For a server
// that fails to start after opening its storage: no VM may use it.
func (f *FS) Close() error {
	if f.image == "" {
		return nil
	}
	return Unmount(f.dir)
}

// Image is the loop-mounted image file, or "" when the data directory's own
// filesystem reflinks.
func (f *FS) Image() string { return f.image }

// Free returns the bytes free for new data.
func (f *FS) Free() (int64, error) { return Free(f.dir) }

// Settle flushes dir's filesystem (syncfs). XFS frees a removed file's
// blocks in the background; after Settle they count as free again.
func Settle(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	defer d.Close()
	_ = unix.Syncfs(int(d.Fd()))
}

// Free returns the bytes free for unprivileged writers on dir's filesystem.
func Free(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// FreeFor returns the bytes free on dir's filesystem for a caller that
// needs need of them. When the first look finds less, it looks again
// after settling the filesystem: space a deletion just gave back may still
// be on its way (XFS frees blocks in the background).
func FreeFor(dir string, need int64) (int64, error) {
	free, err := Free(dir)
	if err == nil && free < need {
		Settle(dir)
		free, err = Free(dir)
	}
	return free, err
}

func defaultSize(under string) int64 {
	free, err := Free(under)
	if err != nil || free < 8<<30 {
		return 8 << 30
	}
	if free > 1<<40 {
		free = 1 << 40
	}
	return free &^ (1<<30 - 1)
}

func makeImage(ctx context.Context, img string, size int64) error {
	tmp := img + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("cowfs: create image: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cowfs: size image: %w", err)
	}
	if out, err := exec.CommandContext(ctx, "mkfs.xfs", "-q", "-f", "-m", "reflink=1", tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cowfs: mkfs.xfs (install xfsprogs): %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cowfs: %w", err)
	}
	return nil
}

// Supported reports whether files in dir can be reflinked.
func Supported(dir string) bool {
	a, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	defer os.Remove(a.Name())
	defer a.Close()
	if _, err := a.Write([]byte("probe")); err != nil {
		return false
	}
	b, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return false
	}
	defer os.Remove(b.Name())
	defer b.Close()
	return unix.IoctlFileClone(int(b.Fd()), int(a.Fd())) == nil
}

// Clone makes dst a reflink copy of src (replacing dst if it exists) with
// mode perm. dst and src must be on the same filesystem.
func Clone(dst, src string, perm os.FileMode) error {
	s, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("clone %s: %w", filepath.Base(src), err)
	}
	defer s.Close()
	tmp := dst + ".clone"
	d, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return fmt.Errorf("clone %s: %w", filepath.Base(src), err)
	}
	err = unix.IoctlFileClone(int(d.Fd()), int(s.Fd()))
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("clone %s to %s: %w", src, dst, err)
	}
	return nil
}

// CloneInto replaces the contents of the existing file dst with a reflink
// copy of src, keeping dst's inode, owner and mode. Processes that have dst
// open or mapped see the new contents: the kernel drops dst's cached pages.
func CloneInto(dst, src string) error {
	s, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("clone %s: %w", filepath.Base(src), err)
	}
	defer s.Close()
	d, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("clone into %s: %w", dst, err)
	}
	err = unix.IoctlFileClone(int(d.Fd()), int(s.Fd()))
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("clone %s into %s: %w", src, dst, err)
	}
	return nil
}

// SyncDir makes what dir holds durable: it fsyncs every regular file in it,
// then dir itself. A save is made durable this way after the VM runs on,
// never while it is paused: on a loop-mounted image a flush writes back
// everything the image has dirty, which can take hundreds of milliseconds.
func SyncDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if err := Fsync(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return Fsync(dir)
}

// Fsync fsyncs one file or directory (a directory after a rename in it).
func Fsync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// StartWriteback asks the kernel to begin writing path's dirty pages back
// without waiting, so that later clones of it find it clean.
func StartWriteback(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

// Unmount unmounts dir if it is a mount point (the loop device goes with
// it). For tests and for removing a data directory.
func Unmount(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if !mounted(abs) {
		return nil
	}
	if err := unix.Unmount(abs, 0); err != nil {
		if err2 := unix.Unmount(abs, unix.MNT_DETACH); err2 != nil {
			return fmt.Errorf("unmount %s: %w", abs, err)
		}
	}
	return nil
}

// loopDirectIO makes the loop device mounted on dir read and write its
// image with direct I/O. Through the host's page cache, every page of a
// VM's files lives twice: in the cache of the file on XFS, and again in the
// cache of the image under it when it is read or written back (1.5-5 GiB
// at 150-200 idle sandboxes). The XFS side caches what the VMs use; the
// image's copy is what gives way. But the image's cache is also the only
// cache shared between clones of one file (each clone has a page cache of
// its own): without it, every read-ahead of a template's RAM, and every
// flush a fork or a hibernation waits for, goes to the disk.
func loopDirectIO(dir string) error {
	dev := mountSource(dir)
	if !strings.HasPrefix(dev, "/dev/loop") {
		return fmt.Errorf("%s is not mounted from a loop device (%q)", dir, dev)
	}
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_DIRECT_IO, 1); err != nil {
		return fmt.Errorf("%s: LOOP_SET_DIRECT_IO: %w", dev, err)
	}
	return nil
}

// mountSource is the device mounted on dir, or "".
func mountSource(dir string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescape(fields[4]) != dir {
			continue
		}
		for i, f := range fields {
			if f == "-" && i+2 < len(fields) {
				return unescape(fields[i+2])
			}
		}
	}
	return ""
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescape(fields[4]) == dir {
			return true
		}
	}
	return false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
