package guestimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// rootfsRecipe names the way BuildRootfs turns a spec into a root file
// system. It is part of RootfsSpec.Key, so changing the recipe (say, the
// guest configuration) must change it, or old cache entries would be reused.
const rootfsRecipe = "pandastack-rootfs-1"

// RootfsSpec says what goes into a Debian root filesystem.
type RootfsSpec struct {
	Suite    string   // "trixie"
	Mirror   string   // "http://deb.debian.org/debian"
	Packages []string // installed after the minimal base, e.g. python3 nodejs npm git curl ca-certificates build-essential
	// Run are shell commands run in the chroot after the packages are
	// installed, with proc, sysfs and /dev but no network (a namespace of
	// their own with only loopback): they configure what Debian installed
	// (pg_createcluster, a config file) and fetch nothing. Steps that fetch
	// or run a package manager's code (npm) run in a build VM instead
	// (templates.Def.Steps).
	Run []string
}

// Key is a stable hex sha256 of the spec (packages sorted and deduplicated,
// plus the build recipe's version) — the cache key.
func (s RootfsSpec) Key() string {
	pkgs := slices.Clone(s.Packages)
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	if pkgs == nil {
		pkgs = []string{}
	}
	var v any = struct {
		Recipe   string
		Suite    string
		Mirror   string
		Packages []string
	}{rootfsRecipe, s.Suite, s.Mirror, pkgs}
	if len(s.Run) > 0 { // specs without steps keep the keys they had
		v = struct {
			Recipe   string
			Suite    string
			Mirror   string
			Packages []string
			Run      []string
		}{rootfsRecipe, s.Suite, s.Mirror, pkgs, s.Run}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic("guestimage: marshal rootfs spec: " + err.Error()) // cannot happen: only strings
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// validate rejects specs that would be misread as command-line options.
func (s RootfsSpec) validate() error {
	if s.Suite == "" || strings.HasPrefix(s.Suite, "-") || strings.ContainsAny(s.Suite, "/ \t\n") {
		return fmt.Errorf("bad suite %q", s.Suite)
	}
	if s.Mirror == "" || strings.HasPrefix(s.Mirror, "-") || strings.ContainsAny(s.Mirror, " \t\n") {
		return fmt.Errorf("bad mirror %q", s.Mirror)
	}
	for _, p := range s.Packages {
		if p == "" || strings.HasPrefix(p, "-") || strings.ContainsAny(p, " \t\n") {
			return fmt.Errorf("bad package name %q", p)
		}
	}
	return nil
}

// chrootEnv is the environment for commands run inside the new root.
var chrootEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"DEBIAN_FRONTEND=noninteractive",
	"DEBCONF_NONINTERACTIVE_SEEN=true",
	"LC_ALL=C",
	"HOME=/root",
}

// BuildRootfs makes a root filesystem directory at cacheDir/rootfs/<Key()>/
// and returns its path. If that directory exists it is complete (entries only
// appear by rename) and is returned at once.
//
// Otherwise it runs `debootstrap --variant=minbase --include=ca-certificates`
// (installing debootstrap with apt-get if missing), then installs
// spec.Packages inside the chroot with apt-get (debootstrap's own resolver
// cannot install some, such as npm), with proc, sysfs and /dev mounted for
// the install and a policy-rc.d that keeps services from starting. Everything
// mounted is unmounted again whatever happens. It then configures the guest:
// hostname "sandbox", /etc/hosts, resolv.conf pointing at QEMU's user-mode
// DNS (10.0.2.3), an empty /etc/fstab, a world-writable /work, user "user"
// (uid and gid 1000) and an empty /etc/machine-id.
//
// The build happens in cacheDir/rootfs/.tmp-<key>-<random>, which is renamed
// into place at the end or removed (once nothing is mounted in it) on
// failure. Tool output goes to progress line by line, prefixed with the step.
func BuildRootfs(ctx context.Context, cacheDir string, spec RootfsSpec, progress io.Writer) (_ string, err error) {
	if err := spec.validate(); err != nil {
		return "", fmt.Errorf("build rootfs: %w", err)
	}
	abs, err := filepath.Abs(cacheDir)
	if err != nil {
		return "", fmt.Errorf("resolve cache dir: %w", err)
	}
	rdir := filepath.Join(abs, "rootfs")
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return "", fmt.Errorf("create rootfs cache dir: %w", err)
	}
	// Mount points in /proc/self/mountinfo have symlinks resolved.
	if rdir, err = filepath.EvalSymlinks(rdir); err != nil {
		return "", fmt.Errorf("resolve rootfs cache dir: %w", err)
	}
	key := spec.Key()
	final := filepath.Join(rdir, key)
	if fi, err := os.Stat(final); err == nil && fi.IsDir() {
		// Its modification time says when a build last used it, for
		// whatever prunes the cache.
		now := time.Now()
		_ = os.Chtimes(final, now, now)
		progressf(progress, "rootfs: %s (cached)", final)
		return final, nil
	} else if err == nil {
		return "", fmt.Errorf("rootfs cache entry %s is not a directory", final)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("check rootfs cache entry: %w", err)
	}

	if err := ensureDebootstrap(ctx, progress); err != nil {
		return "", err
	}

	tmp, err := os.MkdirTemp(rdir, ".tmp-"+key+"-")
	if err != nil {
		return "", fmt.Errorf("create rootfs temp dir: %w", err)
	}
	done := false
	defer func() {
		if done {
			return
		}
		// Never remove a tree with something still mounted in it: that
		// would delete through a bind mount of the host's /dev.
		if uerr := unmountUnder(tmp); uerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up %s (left in place): %w", tmp, uerr))
			return
		}
		if rerr := os.RemoveAll(tmp); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove rootfs temp dir: %w", rerr))
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("chmod rootfs temp dir: %w", err)
	}

	progressf(progress, "rootfs: debootstrap %s from %s into %s", spec.Suite, spec.Mirror, tmp)
	deb := command{
		name:   "debootstrap",
		args:   []string{"--variant=minbase", "--include=ca-certificates", spec.Suite, tmp, spec.Mirror},
		env:    hostAptEnv,
		prefix: "rootfs debootstrap: ",
	}
	if err := deb.run(ctx, progress); err != nil {
		return "", fmt.Errorf("debootstrap %s: %w", spec.Suite, err)
	}
	// debootstrap unmounts what it mounted; make sure.
	if err := unmountUnder(tmp); err != nil {
		return "", fmt.Errorf("unmount after debootstrap: %w", err)
	}

	if err := installPackages(ctx, tmp, spec.Packages, progress); err != nil {
		return "", err
	}
	if err := runSteps(ctx, tmp, spec.Run, progress); err != nil {
		return "", err
	}
	if err := configureGuest(ctx, tmp, progress); err != nil {
		return "", fmt.Errorf("configure guest: %w", err)
	}

	if mounts, err := mountsUnder(tmp); err != nil {
		return "", err
	} else if len(mounts) > 0 {
		return "", fmt.Errorf("build rootfs: still mounted: %s", strings.Join(mounts, ", "))
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		// A concurrent build of the same spec may have finished first; its
		// result is as good as ours, which the deferred cleanup removes.
		if fi, serr := os.Stat(final); serr == nil && fi.IsDir() {
			return final, nil
		}
		return "", fmt.Errorf("move rootfs into cache: %w", err)
	}
	done = true
	progressf(progress, "rootfs: built %s", final)
	return final, nil
}

// ensureDebootstrap installs debootstrap on the host if it is missing.
func ensureDebootstrap(ctx context.Context, progress io.Writer) error {
	if haveTool("debootstrap") {
		return nil
	}
	progressf(progress, "rootfs: installing debootstrap")
	err := withAptLists(ctx, progress, func() error {
		c := command{
			name:   "apt-get",
			args:   []string{"install", "-y", "--no-install-recommends", "debootstrap"},
			env:    hostAptEnv,
			prefix: "apt-get install debootstrap: ",
		}
		return c.run(ctx, progress)
	})
	if err != nil {
		return fmt.Errorf("install debootstrap: %w", err)
	}
	return nil
}

// policyRcD keeps invoke-rc.d from starting services while packages are
// installed into the image.
const policyRcD = "#!/bin/sh\n# Written by pandastack while building the image: start no services.\nexit 101\n"

// installPackages installs pkgs into the Debian tree at root with apt-get
// run in a chroot, then empties apt's caches and package lists. proc, sysfs
// and /dev are mounted for the install and always unmounted afterwards.
func installPackages(ctx context.Context, root string, pkgs []string, progress io.Writer) (err error) {
	policy := filepath.Join(root, "usr/sbin/policy-rc.d")
	if err := writeGuestFile(root, "/usr/sbin/policy-rc.d", policyRcD, 0o755); err != nil {
		return fmt.Errorf("write policy-rc.d: %w", err)
	}
	defer func() {
		if rerr := os.Remove(policy); rerr != nil {
			err = errors.Join(err, fmt.Errorf("remove policy-rc.d: %w", rerr))
		}
	}()
	// apt inside the chroot resolves the mirror with the host's resolver;
	// configureGuest writes the guest's resolv.conf later.
	if resolv, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		if err := writeGuestFile(root, "/etc/resolv.conf", string(resolv), 0o644); err != nil {
			return fmt.Errorf("copy host resolv.conf: %w", err)
		}
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

	steps := [][]string{{"apt-get", "clean"}}
	if len(pkgs) > 0 {
		install := append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, pkgs...)
		steps = [][]string{{"apt-get", "update"}, install, {"apt-get", "clean"}}
	}
	for _, step := range steps {
		progressf(progress, "rootfs: chroot %s", strings.Join(step, " "))
		c := command{
			name:   "chroot",
			args:   append([]string{root}, step...),
			env:    chrootEnv,
			prefix: "rootfs " + step[0] + " " + step[1] + ": ",
		}
		if err := c.run(ctx, progress); err != nil {
			return fmt.Errorf("install packages: %w", err)
		}
	}

	if err := m.unmountAll(); err != nil {
		return fmt.Errorf("unmount chroot file systems: %w", err)
	}
	lists := filepath.Join(root, "var/lib/apt/lists")
	ents, err := os.ReadDir(lists)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("empty apt lists: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(lists, e.Name())); err != nil {
			return fmt.Errorf("empty apt lists: %w", err)
		}
	}
	return nil
}

// Guest identity written by configureGuest.
const (
	guestHostname = "sandbox"
	guestHosts    = "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n"
	guestResolv   = "nameserver 10.0.2.3\n" // QEMU user-mode networking's DNS
	guestUser     = "user"
	guestUID      = "1000"
)

// configureGuest writes the guest-side configuration into the tree at root.
func configureGuest(ctx context.Context, root string, progress io.Writer) error {
	files := []struct {
		path, data string
		perm       fs.FileMode
	}{
		{"/etc/hostname", guestHostname + "\n", 0o644},
		{"/etc/hosts", guestHosts, 0o644},
		{"/etc/resolv.conf", guestResolv, 0o644},
		{"/etc/fstab", "", 0o644},
		{"/etc/machine-id", "", 0o444},
	}
	for _, f := range files {
		if err := writeGuestFile(root, f.path, f.data, f.perm); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}

	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create /work: %w", err)
	}
	if err := os.Chmod(work, 0o777); err != nil { // not sticky; umask-proof
		return fmt.Errorf("chmod /work: %w", err)
	}

	progressf(progress, "rootfs: adding user %s (uid %s)", guestUser, guestUID)
	for _, args := range [][]string{
		{"groupadd", "-g", guestUID, guestUser},
		{"useradd", "-m", "-s", "/bin/bash", "-u", guestUID, "-g", guestUID, guestUser},
	} {
		c := command{name: "chroot", args: append([]string{root}, args...), env: chrootEnv, prefix: "rootfs " + args[0] + ": "}
		if err := c.run(ctx, progress); err != nil {
			return fmt.Errorf("add user %s: %w", guestUser, err)
		}
	}
	return nil
}

// writeGuestFile replaces the file at the absolute guest path under root with
// data and mode perm. It removes what was there first, and refuses to follow
// a symlink, so a link in the guest tree cannot redirect the write to the
// host.
func writeGuestFile(root, guestPath, data string, perm fs.FileMode) error {
	p := filepath.Join(root, guestPath)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil { // umask-proof
		f.Close()
		return err
	}
	return f.Close()
}
