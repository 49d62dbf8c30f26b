package guest

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupRoot holds one cgroup per command, so a timeout or kill reaches every
// process the command started, daemons included.
const cgroupRoot = "/sys/fs/cgroup/pandastack"

// setupSystem prepares the root filesystem for use: kernel filesystems,
// hostname, loopback, cgroups. Failures of optional parts are tolerated.
func setupSystem() error {
	mounts := []struct {
		src, dst, fstype string
		flags            uintptr
		data             string
	}{
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "gid=5,mode=0620,ptmxmode=0666"},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	}
	var errs []string
	for _, m := range mounts {
		_ = os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fstype, m.flags, m.data); err != nil && err != unix.EBUSY {
			errs = append(errs, fmt.Sprintf("mount %s: %v", m.dst, err))
		}
	}
	_ = os.Symlink("/proc/self/fd", "/dev/fd")
	_ = os.Symlink("/proc/self/fd/0", "/dev/stdin")
	_ = os.Symlink("/proc/self/fd/1", "/dev/stdout")
	_ = os.Symlink("/proc/self/fd/2", "/dev/stderr")
	_ = os.Symlink("/dev/pts/ptmx", "/dev/ptmx")
	host := "sandbox"
	if b, err := os.ReadFile("/etc/hostname"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		host = strings.TrimSpace(string(b))
	}
	_ = unix.Sethostname([]byte(host))
	if err := linkUp("lo"); err != nil {
		errs = append(errs, fmt.Sprintf("loopback: %v", err))
	}
	if err := os.MkdirAll(cgroupRoot, 0o755); err != nil {
		errs = append(errs, fmt.Sprintf("cgroup: %v", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// linkUp sets IFF_UP on a network interface.
func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
