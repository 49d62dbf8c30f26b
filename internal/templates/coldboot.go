package templates

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
)

// ColdBoot boots template name from its disk image, without its snapshot,
// and returns how long it took until the guest agent answered: the baseline
// a create is measured against. Nothing is kept.
func (b *Builder) ColdBoot(ctx context.Context, name string) (time.Duration, error) {
	name, id, _, err := b.resolve(ctx, name)
	if err != nil {
		return 0, err
	}
	rec, err := readRecord(b.dir(name, id))
	if err != nil {
		return 0, fmt.Errorf("read template %s: %w", name, err)
	}
	tmp, err := os.MkdirTemp(b.cfg.TemplateDir, ".coldboot-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	_ = os.Chmod(tmp, 0o755)
	// A copy-on-write overlay on the pristine image the template was baked
	// from: the boot writes nothing else.
	disk := filepath.Join(tmp, "disk.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", rec.Image, disk).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("create cold boot disk: %v: %s", err, out)
	}
	t0 := time.Now()
	v, err := b.cfg.Driver.Boot(ctx, vmm.BootSpec{Machine: rec.Machine, Disk: disk, MemFile: filepath.Join(tmp, "mem")})
	if err != nil {
		return 0, fmt.Errorf("boot: %w", err)
	}
	defer v.Kill(context.Background())
	bctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cl, err := waitAgent(bctx, v)
	if err != nil {
		return 0, fmt.Errorf("cold boot: %w", err)
	}
	d := time.Since(t0)
	cl.Close()
	return d, nil
}
