package guestimage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// hostCABundle is the host's trusted certificates (Debian's path).
const hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// runSteps runs each shell command of steps in a chroot of root, in order,
// with proc, sysfs and /dev mounted and the host's resolv.conf (the guest's
// is written afterwards), then removes npm's download cache. A failing step
// names itself in the error.
func runSteps(ctx context.Context, root string, steps []string, progress io.Writer) (err error) {
	if len(steps) == 0 {
		return nil
	}
	if resolv, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		if err := writeGuestFile(root, "/etc/resolv.conf", string(resolv), 0o644); err != nil {
			return fmt.Errorf("copy host resolv.conf: %w", err)
		}
	}
	env := chrootEnv
	// Tools that fetch over TLS (npm, curl) trust what the host trusts:
	// the host's bundle may hold a CA (a proxy's) the guest's lacks. It is
	// only used while the steps run and is not left in the image.
	if bundle, err := os.ReadFile(hostCABundle); err == nil {
		const guestPath = "/tmp/.pandastack-host-ca.crt"
		if err := writeGuestFile(root, guestPath, string(bundle), 0o644); err != nil {
			return fmt.Errorf("copy host CA bundle: %w", err)
		}
		defer os.Remove(filepath.Join(root, guestPath))
		env = append(slices.Clone(chrootEnv), "NODE_EXTRA_CA_CERTS="+guestPath, "npm_config_cafile="+guestPath,
			"SSL_CERT_FILE="+guestPath, "CURL_CA_BUNDLE="+guestPath)
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
		progressf(progress, "rootfs: step %d/%d: %s", i+1, len(steps), step)
		c := command{
			name:   "chroot",
			args:   []string{root, "/bin/sh", "-ec", step},
			env:    env,
			prefix: fmt.Sprintf("rootfs step %d: ", i+1),
		}
		if err := c.run(ctx, progress); err != nil {
			return fmt.Errorf("rootfs step %d (%s): %w", i+1, step, err)
		}
	}
	if err := m.unmountAll(); err != nil {
		return fmt.Errorf("unmount chroot file systems: %w", err)
	}
	if err := os.RemoveAll(filepath.Join(root, "root/.npm")); err != nil {
		return fmt.Errorf("remove npm cache: %w", err)
	}
	return nil
}
