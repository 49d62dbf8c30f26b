package guestimage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mounter mounts file systems under one root directory and unmounts them all
// again; it is meant to be used with a deferred unmountAll.
type mounter struct {
	root    string
	targets []string // in mount order
}

// mount mounts a file system of type fstype at the guest path target under
// m.root, and makes the mount private so nothing mounted beneath it
// propagates to the host.
func (m *mounter) mount(source, target, fstype string, flags uintptr) error {
	dst := filepath.Join(m.root, target)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("create mount point %s: %w", dst, err)
	}
	// A symlink here would move the mount out of the tree, onto the host.
	if fi, err := os.Lstat(dst); err != nil {
		return fmt.Errorf("check mount point: %w", err)
	} else if !fi.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", dst)
	}
	if err := unix.Mount(source, dst, fstype, flags, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", source, dst, err)
	}
	m.targets = append(m.targets, dst)
	if err := unix.Mount("", dst, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make %s a private mount: %w", dst, err)
	}
	return nil
}

// bind bind-mounts the host directory source at the guest path target.
func (m *mounter) bind(source, target string) error {
	return m.mount(source, target, "", unix.MS_BIND)
}

// chrootFS mounts what commands in a chroot at m.root expect: /proc, /sys,
// and the host's /dev and /dev/pts.
func (m *mounter) chrootFS() error {
	for _, fs := range []struct{ source, target, fstype string }{
		{"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}} {
		if err := m.mount(fs.source, fs.target, fs.fstype, 0); err != nil {
			return fmt.Errorf("prepare chroot: %w", err)
		}
	}
	for _, dir := range []string{"/dev", "/dev/pts"} {
		if err := m.bind(dir, dir); err != nil {
			return fmt.Errorf("prepare chroot: %w", err)
		}
	}
	return nil
}

// unmountAll unmounts what m mounted, newest first, then anything else still
// mounted under m.root. It reports an error only if something is still
// mounted in the end.
func (m *mounter) unmountAll() error {
	for i := len(m.targets) - 1; i >= 0; i-- {
		unmount(m.targets[i])
	}
	m.targets = nil
	return unmountUnder(m.root)
}

// unmount unmounts target, lazily as a last resort.
func unmount(target string) {
	if err := unix.Unmount(target, 0); err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return // unmounted, or not a mount point (any more)
	}
	unix.Unmount(target, unix.MNT_DETACH)
}

// unmountUnder unmounts every mount at or below dir, deepest and newest
// first, and checks that none is left.
func unmountUnder(dir string) error {
	for range 5 { // stacked mounts may need more than one pass
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		for _, mp := range mounts {
			unmount(mp)
		}
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("still mounted under %s: %s", dir, strings.Join(mounts, ", "))
	}
	return nil
}

// mountsUnder lists the mount points at or below dir from
// /proc/self/mountinfo, newest first.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space) in a
// /proc/self/mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
