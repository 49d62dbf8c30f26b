package cowfs_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/cowfs"
)

// open mounts a small XFS image in a temporary directory (the host's /tmp
// is ext4, which cannot reflink), and unmounts it at the end.
func open(t *testing.T) *cowfs.FS { return openWith(t, cowfs.Options{}) }

func openWith(t *testing.T, opt cowfs.Options) *cowfs.FS {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("cowfs tests need root to mount an XFS image (CI runs them as root)")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "cow")
	opt.Size = 1 << 30
	fs, err := cowfs.Open(context.Background(), dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cowfs.Unmount(dir); err != nil {
			t.Error(err)
		}
	})
	return fs
}

func TestOpenMountsReflinkFilesystemOnce(t *testing.T) {
	fs := open(t)
	if !cowfs.Supported(fs.Dir()) {
		t.Fatal("mounted filesystem does not reflink")
	}
	if fs.Image() == "" {
		t.Fatal("expected a loop-mounted image on a non-reflink host filesystem")
	}
	if got := loopDIO(t, fs.Image()); got != "0" {
		t.Fatalf("loop device direct I/O %q by default, want 0", got)
	}
	// Opening again finds it mounted and reuses it.
	again, err := cowfs.Open(context.Background(), fs.Dir(), cowfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Dir() != fs.Dir() {
		t.Fatalf("reopened at %s, want %s", again.Dir(), fs.Dir())
	}
}

// With LoopDirectIO the loop device reads and writes the image around the
// host's cache: the files on it are cached once, by the filesystem on it.
func TestLoopDirectIO(t *testing.T) {
	fs := openWith(t, cowfs.Options{LoopDirectIO: true})
	if got := loopDIO(t, fs.Image()); got != "1" {
		t.Fatalf("loop device direct I/O %q, want 1", got)
	}
}

// loopDIO is the dio setting of the loop device backed by image.
func loopDIO(t *testing.T, image string) string {
	t.Helper()
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range loops {
		if back, _ := os.ReadFile(b); strings.TrimSpace(string(back)) == image {
			dio, _ := os.ReadFile(filepath.Join(filepath.Dir(b), "dio"))
			return strings.TrimSpace(string(dio))
		}
	}
	t.Fatalf("no loop device backs %s", image)
	return ""
}

func TestCloneIsIndependentCopy(t *testing.T) {
	fs := open(t)
	src := filepath.Join(fs.Dir(), "src")
	want := bytes.Repeat([]byte("pandastack"), 100000)
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(fs.Dir(), "dst")
	if err := cowfs.Clone(dst, src, 0o640); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, want) {
		t.Fatal("clone differs from its source")
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", st.Mode().Perm())
	}
	// Writes to the clone do not reach the source.
	if err := os.WriteFile(dst, []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(src); !bytes.Equal(got, want) {
		t.Fatal("writing the clone changed the source")
	}
}

// A VM maps its memory file shared before anything is restored into it:
// cloning into the mapped file must show through the existing mapping, and
// drop what was written through it before.
func TestCloneIntoMappedFile(t *testing.T) {
	fs := open(t)
	const size = 8 << 20
	src := filepath.Join(fs.Dir(), "template.mem")
	tpl := bytes.Repeat([]byte{0xAB}, size)
	if err := os.WriteFile(src, tpl, 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(fs.Dir(), "vm.mem")
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	m[4096] = 1
	if err := cowfs.CloneInto(dst, src); err != nil {
		t.Fatal(err)
	}
	if m[0] != 0xAB || m[4096] != 0xAB || m[size-1] != 0xAB {
		t.Fatalf("mapping shows %x %x %x after clone, want ab", m[0], m[4096], m[size-1])
	}
	// Writes through the mapping land in the clone, not the template.
	m[0] = 2
	if err := unix.Msync(m, unix.MS_SYNC); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(src)
	if b[0] != 0xAB {
		t.Fatal("write through the clone's mapping reached the template")
	}
}

func TestFree(t *testing.T) {
	fs := open(t)
	free, err := fs.Free()
	if err != nil {
		t.Fatal(err)
	}
	if free <= 0 || free > 1<<30 {
		t.Fatalf("free %d bytes on a 1 GiB filesystem", free)
	}
}

func TestPrefetchReadsDataOnly(t *testing.T) {
	fs := open(t)
	p := filepath.Join(fs.Dir(), "sparse")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{1}, 1<<20), 100<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := cowfs.Prefetch(p); err != nil {
		t.Fatal(err)
	}
	// The data is resident now; the holes were not read into the cache.
	f, _ = os.Open(p)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, 256<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (256<<20)/4096)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	resident := func(from, to int) (n int) {
		for i := from / 4096; i < to/4096; i++ {
			n += int(vec[i] & 1)
		}
		return n
	}
	if got := resident(100<<20, 101<<20); got != 256 {
		t.Fatalf("%d of 256 data pages resident after prefetch", got)
	}
	if got := resident(0, 64<<20); got != 0 {
		t.Fatalf("%d hole pages were read into the cache", got)
	}
}

// allocated is the host disk the image file takes (its blocks, not its
// apparent size: it is sparse).
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestTrimGivesRemovedFilesBackToTheHost(t *testing.T) {
	fs := open(t)
	big := filepath.Join(fs.Dir(), "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{0xa5}, 1<<20)
	for i := 0; i < 64; i++ {
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cowfs.Settle(fs.Dir())
	full := allocated(t, fs.Image())
	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	cowfs.Settle(fs.Dir())
	if kept := allocated(t, fs.Image()); kept < full-(8<<20) {
		t.Logf("the image shrank by itself (%d → %d bytes): online discard is on", full, kept)
	}
	// Blocks freed moments ago are busy until XFS's log moves on; a trim
	// skips them. Trim until they are given back.
	var after int64
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if _, err := fs.Trim(); err != nil {
			t.Fatal(err)
		}
		if after = allocated(t, fs.Image()); full-after >= 48<<20 || time.Now().After(deadline) {
			break
		}
	}
	if full-after < 48<<20 {
		t.Fatalf("after removing a 64 MiB file and trimming for a minute, the image takes %d MiB of host disk (was %d MiB): its blocks were not given back", after>>20, full>>20)
	}
}

func TestDropCacheKeepsWhatIsMapped(t *testing.T) {
	fs := open(t)
	p := filepath.Join(fs.Dir(), "ram")
	if err := os.WriteFile(p, bytes.Repeat([]byte{7}, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil { // written pages are dirty until then: they would stay
		t.Fatal(err)
	}
	if err := cowfs.Prefetch(p); err != nil {
		t.Fatal(err)
	}
	if n, err := cowfs.Cached(p); err != nil || n != 8<<20 {
		t.Fatalf("cached after prefetch: %d, %v; want 8 MiB", n, err)
	}
	// A process maps and touches the first 2 MiB, as a guest touches its RAM.
	m, err := unix.Mmap(int(f.Fd()), 0, 2<<20, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	sum := 0
	for i := 0; i < len(m); i += 4096 {
		sum += int(m[i])
	}
	if sum != 7*512 {
		t.Fatalf("read %d through the mapping", sum)
	}
	if err := cowfs.DropCache(p); err != nil {
		t.Fatal(err)
	}
	if n, err := cowfs.Cached(p); err != nil || n != 2<<20 {
		t.Fatalf("cached after drop: %d, %v; want the 2 MiB mapped", n, err)
	}
	if err := cowfs.DropCache(filepath.Join(fs.Dir(), "gone")); err == nil {
		t.Fatal("dropping the cache of a missing file did not fail")
	}
}

func TestPunchZerosKeepsTheContent(t *testing.T) {
	fs := open(t)
	p := filepath.Join(fs.Dir(), "ram")
	page := bytes.Repeat([]byte{9}, 4096)
	zeros := make([]byte, 4096)
	// data: X 0 0 0 X 0, a hole, then 0 0 X
	var want []byte
	for _, pg := range [][]byte{page, zeros, zeros, zeros, page, zeros} {
		want = append(want, pg...)
	}
	tail := append(append(append([]byte(nil), zeros...), zeros...), page...)
	if err := os.WriteFile(p, want, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(tail, 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := cowfs.DataSize(p)
	n, err := cowfs.PunchZeros(p)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6*4096 {
		t.Fatalf("punched %d bytes, want the 6 zero pages", n)
	}
	after, _ := cowfs.DataSize(p)
	if after != 3*4096 || before < 9*4096 {
		t.Fatalf("data %d bytes before, %d after; want 3 pages after", before, after)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	full := make([]byte, 1<<20+len(tail))
	copy(full, want)
	copy(full[1<<20:], tail)
	if !bytes.Equal(got, full) {
		t.Fatal("the file reads differently after its zero pages were punched")
	}
}
