package guestimage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// kernelMetaPackage is the Debian package whose dependency names the current
// cloud kernel package.
const kernelMetaPackage = "linux-image-cloud-amd64"

// Kernel is an unpacked Debian guest kernel.
type Kernel struct {
	Version    string // e.g. "6.1.0-56-cloud-amd64"
	Package    string // e.g. "linux-image-6.1.0-56-cloud-amd64_6.1.192-2_amd64.deb" (the file name; part of cache keys)
	Vmlinuz    string // absolute path
	ModulesDir string // absolute path of lib/modules/<Version>
}

// FetchKernel resolves the package that linux-image-cloud-amd64 depends on
// (apt-cache depends), downloads it with `apt-get download`, unpacks it with
// `dpkg -x` into cacheDir/kernel/<package file name without .deb>/ and
// returns it. Debian's package does not ship modules.dep (its postinst runs
// depmod), so FetchKernel writes one, read from the modules themselves.
//
// The result is cached: when the package is already unpacked, the only apt
// work is resolving its name. If apt-cache fails (the package lists may be
// missing), `apt-get update` is run once and the lookup retried. The package
// is unpacked into a temporary directory that is renamed into place, so an
// interrupted run never leaves a half cache entry.
func FetchKernel(ctx context.Context, cacheDir string, progress io.Writer) (Kernel, error) {
	abs, err := filepath.Abs(cacheDir)
	if err != nil {
		return Kernel{}, fmt.Errorf("resolve cache dir: %w", err)
	}
	kdir := filepath.Join(abs, "kernel")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return Kernel{}, fmt.Errorf("create kernel cache dir: %w", err)
	}

	// A name resolved within the last day is reused without asking apt (the
	// lookups take seconds): a rebuild of unchanged inputs does no work.
	resolved := filepath.Join(kdir, "resolved")
	if st, err := os.Stat(resolved); err == nil && time.Since(st.ModTime()) < 24*time.Hour {
		if b, err := os.ReadFile(resolved); err == nil {
			file := strings.TrimSpace(string(b))
			if k, err := loadKernel(filepath.Join(kdir, strings.TrimSuffix(file, ".deb")), file); err == nil && file != "" {
				progressf(progress, "kernel: %s (cached)", file)
				return k, nil
			}
		}
	}

	var pkg, file string
	err = withAptLists(ctx, progress, func() error {
		var err error
		if pkg, err = resolveKernelPackage(ctx); err != nil {
			return err
		}
		file, err = debFileName(ctx, kdir, pkg)
		return err
	})
	if err != nil {
		return Kernel{}, fmt.Errorf("resolve kernel package: %w", err)
	}

	entry := filepath.Join(kdir, strings.TrimSuffix(file, ".deb"))
	defer func() { _ = os.WriteFile(resolved, []byte(file+"\n"), 0o644) }()
	if _, err := os.Stat(entry); err == nil {
		k, err := loadKernel(entry, file)
		if err == nil {
			progressf(progress, "kernel: %s (cached)", file)
			return k, nil
		}
		// Entries only appear by rename once complete, so this is damage
		// from outside; fetch again rather than fail forever.
		progressf(progress, "kernel: cache entry %s unusable (%v); fetching again", entry, err)
		if err := os.RemoveAll(entry); err != nil {
			return Kernel{}, fmt.Errorf("remove unusable kernel cache entry: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Kernel{}, fmt.Errorf("check kernel cache entry: %w", err)
	}

	progressf(progress, "kernel: downloading %s", file)
	tmp, err := os.MkdirTemp(kdir, ".tmp-"+strings.TrimSuffix(file, ".deb")+"-")
	if err != nil {
		return Kernel{}, fmt.Errorf("create kernel temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	dl := command{name: "apt-get", args: []string{"download", pkg}, dir: tmp, env: hostAptEnv, prefix: "apt-get download: "}
	if err := dl.run(ctx, progress); err != nil {
		return Kernel{}, fmt.Errorf("download kernel package: %w", err)
	}
	deb := filepath.Join(tmp, file)
	if _, err := os.Stat(deb); err != nil {
		return Kernel{}, fmt.Errorf("download kernel package: %w", err)
	}
	root := filepath.Join(tmp, "root")
	x := command{name: "dpkg", args: []string{"-x", deb, root}, env: hostAptEnv, prefix: "dpkg -x: "}
	if err := x.run(ctx, progress); err != nil {
		return Kernel{}, fmt.Errorf("unpack kernel package: %w", err)
	}
	version, modsDir, err := findModulesDir(root)
	if err != nil {
		return Kernel{}, fmt.Errorf("unpack kernel package: %w", err)
	}
	if _, err := os.Stat(filepath.Join(modsDir, "modules.dep")); errors.Is(err, fs.ErrNotExist) {
		progressf(progress, "kernel: writing modules.dep for %s", version)
		if err := writeModulesDep(modsDir); err != nil {
			return Kernel{}, fmt.Errorf("write modules.dep: %w", err)
		}
	} else if err != nil {
		return Kernel{}, fmt.Errorf("check modules.dep: %w", err)
	}
	if _, err := loadKernel(root, file); err != nil {
		return Kernel{}, fmt.Errorf("check unpacked kernel: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Kernel{}, err
	}
	if err := os.Rename(root, entry); err != nil {
		// Another FetchKernel may have won the race; its entry is as good.
		if k, lerr := loadKernel(entry, file); lerr == nil {
			return k, nil
		}
		return Kernel{}, fmt.Errorf("move kernel into cache: %w", err)
	}
	k, err := loadKernel(entry, file)
	if err != nil {
		return Kernel{}, fmt.Errorf("check cached kernel: %w", err)
	}
	progressf(progress, "kernel: %s unpacked to %s", file, entry)
	return k, nil
}

// resolveKernelPackage returns the linux-image-* package that the kernel
// meta package depends on.
func resolveKernelPackage(ctx context.Context) (string, error) {
	c := command{name: "apt-cache", args: []string{"depends", kernelMetaPackage}, env: hostAptEnv}
	out, err := c.output(ctx, nil, true)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "|")
		name, ok := strings.CutPrefix(line, "Depends:")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		if strings.HasPrefix(name, "linux-image-") {
			return name, nil
		}
	}
	return "", fmt.Errorf("apt-cache depends %s: no linux-image-* dependency in output %q", kernelMetaPackage, out)
}

// debFileName returns the file name `apt-get download pkg` would write, from
// `apt-get download --print-uris` (which downloads nothing).
func debFileName(ctx context.Context, dir, pkg string) (string, error) {
	c := command{name: "apt-get", args: []string{"download", "--print-uris", pkg}, dir: dir, env: hostAptEnv}
	out, err := c.output(ctx, nil, true)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.HasPrefix(f[0], "'") {
			name := f[1]
			if !strings.HasSuffix(name, ".deb") || strings.ContainsAny(name, "/\x00") || name == ".deb" {
				return "", fmt.Errorf("apt-get download --print-uris %s: odd file name %q", pkg, name)
			}
			return name, nil
		}
	}
	return "", fmt.Errorf("apt-get download --print-uris %s: no URI in output %q", pkg, out)
}

// findModulesDir finds the single lib/modules/<version> directory in an
// unpacked kernel package (under usr/ in newer, merged-/usr packages).
func findModulesDir(root string) (version, dir string, err error) {
	for _, base := range []string{"lib/modules", "usr/lib/modules"} {
		ents, err := os.ReadDir(filepath.Join(root, base))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		var dirs []string
		for _, e := range ents {
			if e.IsDir() {
				dirs = append(dirs, e.Name())
			}
		}
		if len(dirs) != 1 {
			return "", "", fmt.Errorf("want one kernel version in %s, found %d (%v)", base, len(dirs), dirs)
		}
		return dirs[0], filepath.Join(root, base, dirs[0]), nil
	}
	return "", "", fmt.Errorf("no lib/modules directory in %s", root)
}

// loadKernel describes the kernel unpacked at root and checks that the files
// it names are there.
func loadKernel(root, file string) (Kernel, error) {
	version, modsDir, err := findModulesDir(root)
	if err != nil {
		return Kernel{}, err
	}
	k := Kernel{
		Version:    version,
		Package:    file,
		Vmlinuz:    filepath.Join(root, "boot", "vmlinuz-"+version),
		ModulesDir: modsDir,
	}
	for _, p := range []string{k.Vmlinuz, filepath.Join(modsDir, "modules.dep")} {
		fi, err := os.Stat(p)
		if err != nil {
			return Kernel{}, err
		}
		if !fi.Mode().IsRegular() {
			return Kernel{}, fmt.Errorf("%s is not a regular file", p)
		}
	}
	return k, nil
}
