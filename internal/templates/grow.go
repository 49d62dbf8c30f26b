package templates

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
)

// Disk growth. A bigger disk is a qcow2 overlay with a larger virtual size
// on the build's disk; the guest, cold-booted on it before the bake, grows
// its mounted ext4 root online. The guest images have no resize2fs, so the
// resize is the kernel's own online-resize ioctl (EXT4_IOC_RESIZE_FS),
// issued from python3. The filesystem is never parsed on the host: it was
// written by untrusted build steps.

// MaxDiskGiB bounds a template's disk.
const MaxDiskGiB = 256

// growScript grows the root ext4 to the size of its device (/dev/vda).
const growScript = `import fcntl, os, struct
st = os.statvfs("/")
dev = int(open("/sys/block/vda/size").read()) * 512
blocks = dev // st.f_frsize
fd = os.open("/", os.O_RDONLY)
fcntl.ioctl(fd, 0x40086610, struct.pack("Q", blocks))  # EXT4_IOC_RESIZE_FS
print("root filesystem grown to %d MiB" % (blocks * st.f_frsize >> 20))
`

// growGuest grows the guest's root filesystem to its disk's size.
func growGuest(ctx context.Context, cl *guestconn.Client, out io.Writer) error {
	if err := guestRun(ctx, cl, pandastack.ExecRequest{Args: []string{"python3", "-c", growScript}, TimeoutSeconds: 300}, out); err != nil {
		return pandastack.Errorf(pandastack.EInvalid, "grow the root filesystem (the template needs python3 for that): %s", errText(err))
	}
	return nil
}

// grownDisk returns an overlay of disk with a virtual size of gib GiB,
// made once and kept under DATA/steps.
func (b *Builder) grownDisk(ctx context.Context, disk string, gib int) (string, error) {
	cur := b.diskMiB(ctx, disk)
	if cur == 0 {
		return "", fmt.Errorf("size of %s unknown", disk)
	}
	if gib<<10 < cur {
		return "", pandastack.Errorf(pandastack.EInvalid, "disk_gib %d is smaller than the template's disk (%d MiB): disks only grow", gib, cur)
	}
	key := hashOf("grow", disk, fmt.Sprint(gib))
	defer b.lock("step:" + key)()
	dir := filepath.Join(b.cfg.DataDir, "steps", key)
	grown := filepath.Join(dir, "disk.qcow2")
	if _, err := os.Stat(grown); err == nil {
		return grown, nil
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", imageFormat(disk), "-b", disk,
		filepath.Join(tmp, "disk.qcow2"), fmt.Sprintf("%dG", gib)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("create grown disk: %v: %s", err, out)
	}
	_ = os.Chmod(filepath.Join(tmp, "disk.qcow2"), 0o444)
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("keep grown disk: %w", err)
	}
	return grown, nil
}
