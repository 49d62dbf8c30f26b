package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrEscape is returned when a path inside a directory would resolve
// outside it or through a link.
var ErrEscape = errors.New("path leaves its directory or goes through a link")

// OpenBeneath opens name, a path relative to dir, without following any
// symbolic link and without leaving dir: what root uses to open files in a
// directory an unprivileged VM could have written. flag is as for
// os.OpenFile (O_CREAT with perm).
func OpenBeneath(dir, name string, flag int, perm os.FileMode) (*os.File, error) {
	if filepath.IsAbs(name) || name == "" {
		return nil, fmt.Errorf("open %s in %s: %w", name, dir, ErrEscape)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	how := &unix.OpenHow{
		Flags:   uint64(flag) | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Mode:    uint64(perm.Perm()),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	fd, err := unix.Openat2(dfd, name, how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = openNoFollow(dfd, name, flag, perm)
	}
	if err != nil {
		if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("open %s in %s: %w", name, dir, ErrEscape)
		}
		return nil, fmt.Errorf("open %s in %s: %w", name, dir, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, name)), nil
}

// openNoFollow is OpenBeneath for kernels without openat2 (before 5.6):
// one component at a time, each opened with O_NOFOLLOW.
func openNoFollow(dfd int, name string, flag int, perm os.FileMode) (int, error) {
	parts := strings.Split(filepath.Clean(name), "/")
	cur, err := unix.Dup(dfd)
	if err != nil {
		return -1, err
	}
	for i, p := range parts {
		if p == ".." || p == "." || p == "" {
			unix.Close(cur)
			return -1, unix.EXDEV
		}
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if i == len(parts)-1 {
			f = flag | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		next, err := unix.Openat(cur, p, f, uint32(perm.Perm()))
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// ReadFileBeneath reads name in dir as OpenBeneath opens it, refusing
// anything but a regular file.
func ReadFileBeneath(dir, name string, max int64) ([]byte, error) {
	f, err := OpenBeneath(dir, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", name, dir, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s in %s: not a regular file", name, dir)
	}
	if st.Size() > max {
		return nil, fmt.Errorf("read %s in %s: %d bytes, more than %d", name, dir, st.Size(), max)
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if err != nil && n != len(b) {
		return nil, fmt.Errorf("read %s in %s: %w", name, dir, err)
	}
	return b, nil
}
