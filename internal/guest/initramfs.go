package guest

import (
	"bufio"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rootExec is the agent's path inside the root filesystem.
const rootExec = "/usr/sbin/pandastack-guest"

func isInitramfs() bool {
	_, err := os.Stat("/modules/order")
	return err == nil
}

// initramfs loads the modules listed in /modules/order, mounts /dev/vda and
// switches root to it, executing the agent found there as the new PID 1.
func initramfs() error {
	_ = unix.Mount("devtmpfs", "/dev", "devtmpfs", 0, "")
	_ = unix.Mount("proc", "/proc", "proc", 0, "")
	_ = unix.Mount("sysfs", "/sys", "sysfs", 0, "")
	if cmdline, _ := os.ReadFile("/proc/cmdline"); strings.Contains(string(cmdline), "pandastack.probe=1") {
		probe()
	}
	f, err := os.Open("/modules/order")
	if err != nil {
		return fmt.Errorf("open module list: %w", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" {
			continue
		}
		if err := loadModule(filepath.Join("/modules", name)); err != nil {
			return err
		}
	}
	f.Close()
	dev := "/dev/vda"
	for i := 0; ; i++ {
		if _, err := os.Stat(dev); err == nil {
			break
		}
		if i > 2000 {
			return fmt.Errorf("root device %s did not appear", dev)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := unix.Mount(dev, "/newroot", "ext4", unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("mount root %s: %w", dev, err)
	}
	// Free the initramfs memory: everything but the mount points goes.
	for _, name := range []string{"/modules", "/init"} {
		_ = os.RemoveAll(name)
	}
	for _, m := range []string{"/dev", "/proc", "/sys"} {
		_ = os.MkdirAll("/newroot"+m, 0o755)
		if err := unix.Mount(m, "/newroot"+m, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s: %w", m, err)
		}
	}
	if err := unix.Chdir("/newroot"); err != nil {
		return fmt.Errorf("chdir newroot: %w", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	_ = unix.Chdir("/")
	log.Printf("switching root")
	return syscall.Exec(rootExec, []string{rootExec}, os.Environ())
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open module: %w", err)
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && err != unix.EEXIST {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// probe answers the host's accelerator probe: the kernel reached userspace.
func probe() {
	if f, err := os.OpenFile("/dev/console", os.O_WRONLY, 0); err == nil {
		fmt.Fprintln(f, "PANDASTACK-PROBE-OK")
		f.Close()
	}
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}
