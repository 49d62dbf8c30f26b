package guestimage

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// runSteps runs each shell command of steps in a chroot of root, in order,
// with proc, sysfs and /dev mounted, in a network namespace of its own that
// holds only a loopback interface: a step here fetches nothing. (A chroot is
// no boundary for root, so nothing from outside Debian's signed packages may
// run here: steps that fetch, an npm install above all, run inside a build
// VM instead; see templates.Def.Steps.) A failing step names itself in the
// error.
func runSteps(ctx context.Context, root string, steps []string, progress io.Writer) (err error) {
	if len(steps) == 0 {
		return nil
	}
	m := &mounter{root: root}
	defer func() {
		if uerr := m.unmountAll(); uerr != nil {
			err = errors.Join(err, fmt.Errorf("unmount chroot file systems: %w", uerr))
		}
	}()
	if err := m.chrootFS(); err != nil {
		return err
	}
	for i, step := range steps {
		progressf(progress, "rootfs: step %d/%d (offline): %s", i+1, len(steps), step)
		c := command{
			name:   "unshare",
			args:   []string{"--net", "chroot", root, "/bin/sh", "-ec", step},
			env:    chrootEnv,
			prefix: fmt.Sprintf("rootfs step %d: ", i+1),
		}
		if err := c.run(ctx, progress); err != nil {
			return fmt.Errorf("rootfs step %d (%s): %w", i+1, step, err)
		}
	}
	if err := m.unmountAll(); err != nil {
		return fmt.Errorf("unmount chroot file systems: %w", err)
	}
	return nil
}
