package templates

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/vmm"
	"golang.org/x/sys/unix"
)

// Catalog build steps (Def.Steps) run in a build VM, never on the host: an
// npm install runs its packages' install scripts, code from the registry
// that would be host root in a chroot (a chroot is no boundary for root:
// /proc/1/root, raw devices, mount). The VM cold-boots a copy of the
// template's disk image, grown by stepsHeadroomMiB, on the template's own
// size and under the driver's jail, with network egress under the default
// policy (the private and link-local ranges stay denied). Each step runs as
// root through the guest agent, the server's extra CA certificates trusted
// for the steps' duration only; the guest syncs its disk and the VM is
// stopped, and that disk is the image the template bakes from. The host
// never mounts or parses it: the bake boots it.
//
// The image is cached under CacheDir/images by a key of the image it
// started from and the steps: a rebuild with unchanged steps boots nothing.

// stepsRecipe versions how steps turn an image into another; it is part of
// the key, so a change here rebuilds.
const stepsRecipe = "build-vm-steps-1"

// stepsHeadroomMiB is what the image grows by before the steps run: room
// for what they install (the agent template's npm packages take 1.5 GiB)
// and npm's download cache, removed afterwards. The raw file is sparse: the
// room costs nothing until written.
const stepsHeadroomMiB = 4096

// Guest paths of the CA files the steps trust; removed after the steps.
const (
	buildExtraCA  = "/tmp/.pandastack-build-extra-ca.crt"
	buildCABundle = "/tmp/.pandastack-build-ca.crt"
)

// stepsKey is the cache key of the image steps leave on base.
func stepsKey(baseKey string, steps []string) string {
	return hashOf(append([]string{"steps", stepsRecipe, baseKey, fmt.Sprint(stepsHeadroomMiB)}, steps...)...)
}

// stepImage returns the image def.Steps leave on base (key baseKey), and
// its key: from the cache, or made in a build VM.
func (b *Builder) stepImage(ctx context.Context, def Def, base, baseKey string, bt Boot, progress io.Writer) (string, string, error) {
	key := stepsKey(baseKey, def.Steps)
	img := filepath.Join(b.cfg.CacheDir, "images", key+".raw")
	defer b.lock("steps:" + key)()
	if _, err := os.Stat(img); err == nil {
		now := time.Now()
		_ = os.Chtimes(img, now, now)
		fmt.Fprintf(progress, "build steps: cached (%s)\n", img)
		return img, key, nil
	}
	t0 := time.Now()
	if err := b.runBuildVM(ctx, def, base, img, bt, progress); err != nil {
		return "", "", fmt.Errorf("template %s: build steps in a build VM: %w", def.Name, err)
	}
	fmt.Fprintf(progress, "build steps: done in %s\n", time.Since(t0).Round(time.Millisecond))
	return img, key, nil
}

// runBuildVM makes img: a grown copy of base with def.Steps run in a VM
// booted from it. Nothing is left at img unless every step succeeded, and
// nothing of the VM is left at all.
func (b *Builder) runBuildVM(ctx context.Context, def Def, base, img string, bt Boot, progress io.Writer) error {
	sweepStepDirs(filepath.Dir(img))
	tmp, err := os.MkdirTemp(filepath.Dir(img), ".steps-")
	if err != nil {
		return fmt.Errorf("create build VM dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Held while the build VM runs: sweepStepDirs leaves the directory
	// alone (another server may share this cache).
	// (Locked before it takes its name: a sweep never sees it unlocked.)
	lock, err := os.OpenFile(filepath.Join(tmp, ".lock.new"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("lock build VM dir: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock build VM dir: %w", err)
	}
	if err := os.Rename(lock.Name(), filepath.Join(tmp, ".lock")); err != nil {
		return fmt.Errorf("lock build VM dir: %w", err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	disk, mem := filepath.Join(tmp, vmm.DiskFile), filepath.Join(tmp, vmm.MemFile)
	if err := rawCopy(ctx, base, disk); err != nil {
		return err
	}
	if err := os.Chmod(disk, 0o600); err != nil { // cp kept the image's 0444
		return err
	}
	fi, err := os.Stat(disk)
	if err != nil {
		return err
	}
	// Only the file grows here; the guest grows its file system.
	if err := os.Truncate(disk, fi.Size()+stepsHeadroomMiB<<20); err != nil {
		return fmt.Errorf("grow build disk: %w", err)
	}
	fmt.Fprintf(progress, "build steps: booting a build VM (%d vCPU, %d MiB, network egress under the default policy)\n", def.CPUs, def.MemoryMiB)
	v, err := b.cfg.Driver.Boot(ctx, vmm.BootSpec{Machine: b.machine(def, bt), Disk: disk, MemFile: mem})
	if err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	defer v.Kill(context.Background())
	vctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-v.Exited():
			cancel()
		case <-vctx.Done():
		}
	}()
	bctx, bcancel := context.WithTimeout(vctx, 3*time.Minute)
	cl, err := waitAgent(bctx, v)
	bcancel()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := growGuest(vctx, cl, progress); err != nil {
		return err
	}
	env, err := b.trustExtraCA(vctx, cl, progress)
	if err != nil {
		return err
	}
	for i, step := range def.Steps {
		fmt.Fprintf(progress, "build steps: step %d/%d (in the build VM): %s\n", i+1, len(def.Steps), step)
		sctx, scancel := context.WithTimeout(vctx, stepTimeout)
		err := guestRun(sctx, cl, pandastack.ExecRequest{Args: []string{"/bin/sh", "-ec", step}, Env: env, Cwd: "/",
			TimeoutSeconds: stepTimeout.Seconds()}, progress)
		scancel()
		if err != nil {
			return fmt.Errorf("step %d/%d (%s): %s", i+1, len(def.Steps), step, errText(err))
		}
	}
	// What only the build needed goes: the CA files and npm's cache.
	if err := guestRun(vctx, cl, pandastack.ExecRequest{Args: []string{"rm", "-rf", buildExtraCA, buildCABundle, "/root/.npm"},
		TimeoutSeconds: 300}, progress); err != nil {
		return fmt.Errorf("clean up after the steps: %w", err)
	}
	if err := cl.Sync(vctx); err != nil {
		return fmt.Errorf("sync guest disk: %w", err)
	}
	cl.Close()
	if err := v.Kill(ctx); err != nil {
		return fmt.Errorf("stop build VM: %w", err)
	}
	// The disk was the build VM's (its uid could write it): it becomes
	// root's and read-only, like every cached image.
	if err := os.Lchown(disk, 0, 0); err != nil {
		return fmt.Errorf("keep build disk: %w", err)
	}
	if err := os.Chmod(disk, 0o444); err != nil {
		return fmt.Errorf("keep build disk: %w", err)
	}
	if err := os.Rename(disk, img); err != nil {
		return fmt.Errorf("keep build disk: %w", err)
	}
	return nil
}

// trustExtraCA writes the builder's extra CA certificates into the build
// VM and returns the environment that makes the steps' tools trust them:
// Node and npm (NODE_EXTRA_CA_CERTS, npm's cafile) and OpenSSL's users
// (curl, git, Python) through a bundle of the guest's CAs plus the extra
// ones. Without extra certificates it is nil.
func (b *Builder) trustExtraCA(ctx context.Context, cl *guestconn.Client, progress io.Writer) (map[string]string, error) {
	if len(b.cfg.ExtraCA) == 0 {
		return nil, nil
	}
	if _, err := cl.WriteFile(ctx, buildExtraCA, 0o644, bytes.NewReader(b.cfg.ExtraCA)); err != nil {
		return nil, fmt.Errorf("write extra CA certificates into the build VM: %w", err)
	}
	if err := guestRun(ctx, cl, pandastack.ExecRequest{Args: []string{"/bin/sh", "-ec",
		`{ cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null || true; cat "$1"; } > "$2"`, "sh", buildExtraCA, buildCABundle}, TimeoutSeconds: 60}, progress); err != nil {
		return nil, fmt.Errorf("make the build VM's CA bundle: %w", err)
	}
	return map[string]string{
		"NODE_EXTRA_CA_CERTS": buildExtraCA,
		"npm_config_cafile":   buildCABundle,
		"SSL_CERT_FILE":       buildCABundle,
		"CURL_CA_BUNDLE":      buildCABundle,
		"GIT_SSL_CAINFO":      buildCABundle,
	}, nil
}

// sweepStepDirs removes the build VM directories under dir that a killed
// build left (a disk copy each): those whose lock nobody holds.
func sweepStepDirs(dir string) {
	dirs, _ := filepath.Glob(filepath.Join(dir, ".steps-*"))
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, ".lock"))
		if err != nil {
			continue // not made yet, or being removed
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			_ = os.RemoveAll(d)
		}
		f.Close()
	}
}
