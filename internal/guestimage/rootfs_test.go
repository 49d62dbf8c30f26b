package guestimage

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testSuite and testMirror are what the guest image is built from.
const (
	testSuite  = "trixie"
	testMirror = "http://deb.debian.org/debian"
)

// rootfsCache returns a fresh cache directory whose rootfs builds are
// checked, before the directory is removed, for leaked mounts: removing a
// tree with the host's /dev bind-mounted in it would delete device nodes.
func rootfsCache(t *testing.T) string {
	t.Helper()
	cache, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // runs before TempDir's removal
		if m, _ := mountsUnder(cache); len(m) > 0 {
			t.Errorf("mounts leaked under the cache: %v", m)
			if err := unmountUnder(cache); err != nil {
				t.Fatalf("cannot unmount leaked mounts; not removing: %v", err)
			}
		}
	})
	return cache
}

// checkNoMounts fails if anything is mounted under dir.
func checkNoMounts(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 4 && strings.HasPrefix(unescapeMountinfo(f[4]), dir) {
			t.Errorf("still mounted: %s", sc.Text())
		}
	}
}

// checkNoTempDirs fails if a build left a temporary directory behind.
func checkNoTempDirs(t *testing.T, cache string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(cache, "rootfs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary directory left behind: %s", e.Name())
		}
	}
}

func TestRootfsSpecKey(t *testing.T) {
	a := RootfsSpec{Suite: "trixie", Mirror: testMirror, Packages: []string{"python3", "git", "curl"}}
	b := RootfsSpec{Suite: "trixie", Mirror: testMirror, Packages: []string{"curl", "python3", "git", "git"}}
	if a.Key() != b.Key() {
		t.Error("package order or duplicates change the key")
	}
	if len(a.Key()) != 64 || strings.Trim(a.Key(), "0123456789abcdef") != "" {
		t.Errorf("key %q is not hex sha256", a.Key())
	}
	if a.Key() != a.Key() {
		t.Error("key not stable")
	}
	for _, c := range []RootfsSpec{
		{Suite: "bookworm", Mirror: a.Mirror, Packages: a.Packages},
		{Suite: a.Suite, Mirror: "http://example.org/debian", Packages: a.Packages},
		{Suite: a.Suite, Mirror: a.Mirror, Packages: []string{"python3", "git"}},
		{Suite: a.Suite, Mirror: a.Mirror},
		// Joining fields must not be ambiguous.
		{Suite: a.Suite, Mirror: a.Mirror, Packages: []string{"curl,git", "python3"}},
		{Suite: a.Suite, Mirror: a.Mirror, Packages: a.Packages, Run: []string{"npm install -g x@1"}},
	} {
		if c.Key() == a.Key() {
			t.Errorf("spec %+v has the same key as %+v", c, a)
		}
	}
	if (RootfsSpec{Suite: "x", Mirror: "m"}).Key() != (RootfsSpec{Suite: "x", Mirror: "m", Packages: []string{}}).Key() {
		t.Error("nil and empty package lists differ")
	}
	r1 := RootfsSpec{Suite: "x", Mirror: "m", Run: []string{"a", "b"}}
	r2 := RootfsSpec{Suite: "x", Mirror: "m", Run: []string{"b", "a"}}
	if r1.Key() == r2.Key() {
		t.Error("the order of run steps does not change the key")
	}
}

// TestRootfsSpecKeyUnchanged pins the key of a spec without run steps, so
// adding fields does not silently invalidate every cached root filesystem.
func TestRootfsSpecKeyUnchanged(t *testing.T) {
	a := RootfsSpec{Suite: "trixie", Mirror: "http://deb.debian.org/debian", Packages: []string{"python3-minimal", "procps"}}
	b := a
	b.Run = []string{}
	if a.Key() != b.Key() {
		t.Error("an empty run list changes the key")
	}
}

// TestBuildRootfs debootstraps a real trixie root file system with
// python3-minimal installed in the chroot (about a minute), then makes an
// ext4 image of it with the guest agent added.
func TestBuildRootfs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cache := rootfsCache(t)
	spec := RootfsSpec{Suite: testSuite, Mirror: testMirror, Packages: []string{"python3-minimal"}}
	var progress bytes.Buffer
	start := time.Now()
	dir, err := BuildRootfs(ctx, cache, spec, &progress)
	if err != nil {
		t.Fatalf("BuildRootfs: %v\nprogress tail:\n%s", err, tail(progress.String(), 40))
	}
	t.Logf("BuildRootfs took %v", time.Since(start))
	if want := filepath.Join(cache, "rootfs", spec.Key()); dir != want {
		t.Errorf("path %s, want %s", dir, want)
	}
	for _, step := range []string{"rootfs debootstrap: ", "rootfs apt-get install: "} {
		if !strings.Contains(progress.String(), "\n"+step) {
			t.Errorf("no progress lines prefixed %q", step)
		}
	}
	checkNoMounts(t, cache)
	checkNoTempDirs(t, cache)

	if fi, err := os.Stat(filepath.Join(dir, "usr/bin/python3")); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Errorf("/usr/bin/python3: %v", err)
	}
	readGuest := func(p string) string {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Error(err)
		}
		return string(b)
	}
	if got := readGuest("etc/hostname"); got != "sandbox\n" {
		t.Errorf("/etc/hostname = %q", got)
	}
	if got := readGuest("etc/resolv.conf"); got != "nameserver 10.0.2.3\n" {
		t.Errorf("/etc/resolv.conf = %q", got)
	}
	if got := readGuest("etc/hosts"); !strings.Contains(got, "127.0.0.1\tlocalhost\n") || !strings.Contains(got, "127.0.1.1\tsandbox\n") {
		t.Errorf("/etc/hosts = %q", got)
	}
	if got := readGuest("etc/fstab"); got != "" {
		t.Errorf("/etc/fstab = %q, want empty", got)
	}
	if got := readGuest("etc/machine-id"); got != "" {
		t.Errorf("/etc/machine-id = %q, want empty", got)
	}
	if !strings.Contains(readGuest("etc/passwd"), "\nuser:x:1000:1000::/home/user:/bin/bash\n") {
		t.Errorf("no user 1000 in /etc/passwd:\n%s", readGuest("etc/passwd"))
	}
	if !strings.Contains(readGuest("etc/group"), "\nuser:x:1000:") {
		t.Errorf("no group 1000 in /etc/group")
	}
	if fi, err := os.Stat(filepath.Join(dir, "home/user")); err != nil || !fi.IsDir() {
		t.Errorf("/home/user: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "work")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky != 0 {
		t.Errorf("/work: %v, mode %v", err, fi.Mode())
	}
	if _, err := os.Lstat(filepath.Join(dir, "usr/sbin/policy-rc.d")); !os.IsNotExist(err) {
		t.Errorf("policy-rc.d left in the image: %v", err)
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "var/lib/apt/lists")); err != nil || len(ents) != 0 {
		t.Errorf("apt lists not emptied: %v %v", ents, err)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "var/cache/apt/archives/*.deb"))
	if len(debs) != 0 {
		t.Errorf("%d .deb files left in the apt cache", len(debs))
	}

	t.Run("cached", func(t *testing.T) {
		var progress bytes.Buffer
		start := time.Now()
		dir2, err := BuildRootfs(ctx, cache, spec, &progress)
		if err != nil {
			t.Fatal(err)
		}
		if dir2 != dir {
			t.Errorf("second call returned %s, want %s", dir2, dir)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("second call took %v", d)
		}
	})

	t.Run("ext4", func(t *testing.T) {
		agent := filepath.Join(t.TempDir(), "pandastack-guest")
		writeTestFile(t, agent, "\x7fELF agent", 0o755)
		img := filepath.Join(t.TempDir(), "root.ext4")
		start := time.Now()
		size, err := WriteExt4(ctx, img, dir, map[string]string{"/usr/sbin/pandastack-guest": agent}, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("WriteExt4: %d MiB in %v", size, time.Since(start))
		if typ, mode, owner := statMode(t, img, "/usr/sbin/pandastack-guest"); typ != "regular" || mode != "0755" || owner != "0:0" {
			t.Errorf("agent: %s %s %s", typ, mode, owner)
		}
		if got := debugfsRun(t, img, "cat /etc/hostname"); got != "sandbox\n" {
			t.Errorf("/etc/hostname in image: %q", got)
		}
		if _, mode, owner := statMode(t, img, "/work"); mode != "0777" || owner != "0:0" {
			t.Errorf("/work in image: mode %s owner %s", mode, owner)
		}
		if _, _, owner := statMode(t, img, "/home/user"); owner != "1000:1000" {
			t.Errorf("/home/user in image: owner %s", owner)
		}
		if _, err := os.Lstat(filepath.Join(dir, "usr/sbin/pandastack-guest")); !os.IsNotExist(err) {
			t.Errorf("WriteExt4 changed the rootfs dir: %v", err)
		}
	})
}

// TestBuildRootfsCancel cancels a build while the chroot file systems are
// mounted and checks that it cleans up: nothing mounted, no temporary
// directory, no cache entry.
func TestBuildRootfsCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cache := rootfsCache(t)
	spec := RootfsSpec{Suite: testSuite, Mirror: testMirror, Packages: []string{"python3-minimal"}}
	w := &cancelOn{marker: "rootfs apt-get update: ", cancel: cancel}
	_, err := BuildRootfs(ctx, cache, spec, w)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("BuildRootfs: error %v, want context.Canceled\nprogress tail:\n%s", err, tail(w.String(), 40))
	}
	if !w.fired() {
		t.Fatal("never reached apt-get update")
	}
	t.Logf("cancelled build: %v", err)
	checkNoMounts(t, cache)
	checkNoTempDirs(t, cache)
	if _, err := os.Stat(filepath.Join(cache, "rootfs", spec.Key())); !os.IsNotExist(err) {
		t.Errorf("cancelled build left a cache entry: %v", err)
	}
}

// cancelOn is a progress writer that calls cancel when a line containing
// marker is written.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel func()
	done   bool
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if !c.done && bytes.Contains(p, []byte(c.marker)) {
		c.done = true
		c.cancel()
	}
	return len(p), nil
}

func (c *cancelOn) fired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

func (c *cancelOn) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
