package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// systemDirs are bound read-only into every jail: the VMM binary, its
// libraries and firmware. Debian merges /bin and /lib into /usr; the
// jail's /bin, /lib and /lib64 are links into it.
var systemLinks = map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"}

var stdDevices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"}

// makeRoot builds the jail's root on a tmpfs at RootDir, in the child's own
// mount namespace, and pivots into it. Nothing of the host's tree is left
// reachable but the binds.
func makeRoot(spec Spec, binary string) error {
	// Nothing done here propagates back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := RootDir
	if err := unix.Mount("jail", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k,nr_inodes=1024"); err != nil {
		return fmt.Errorf("mount jail root: %w", err)
	}
	if err := bindInto(root, "/usr", false, true, false); err != nil {
		return err
	}
	if !strings.HasPrefix(binary, "/usr/") {
		// A VMM outside /usr (e.g. /opt) is bound on its own.
		if err := bindInto(root, binary, false, false, false); err != nil {
			return err
		}
	}
	for name, target := range systemLinks {
		if _, err := os.Stat("/" + target); err != nil {
			continue
		}
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			return fmt.Errorf("link /%s: %w", name, err)
		}
	}
	for _, dev := range append(stdDevices, spec.Devices...) {
		if err := bindInto(root, dev, true, false, true); err != nil {
			return err
		}
	}
	for _, b := range spec.Binds {
		st, err := os.Stat(b.Path)
		if err != nil {
			return fmt.Errorf("bind %s: %w", b.Path, err)
		}
		if err := bindInto(root, b.Path, b.Writable, st.IsDir(), false); err != nil {
			return err
		}
	}
	if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make jail root read-only: %w", err)
	}
	// pivot_root(".", ".") stacks the old root under the new one; the
	// detach then drops it.
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("enter jail root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot into jail root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host's root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("enter jail root: %w", err)
	}
	return nil
}

// bindInto binds host path p at the same path under root: writable or
// read-only, always nosuid, and nodev unless it is a device node.
func bindInto(root, p string, writable, dir, device bool) error {
	target := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	if dir {
		if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("bind %s: %w", p, err)
		}
	} else {
		f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
		f.Close()
	}
	if err := unix.Mount(p, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID)
	if !device {
		flags |= unix.MS_NODEV
	}
	if !writable {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s: restrict: %w", p, err)
	}
	return nil
}
