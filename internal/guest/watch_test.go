package guest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// newTestWatcher watches root (recursive) as watch does.
func newTestWatcher(t *testing.T, root string) *watcher {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), fd: fd, root: root, recursive: true, dirs: map[int]string{}, from: map[uint32]move{}}
	t.Cleanup(func() { w.f.Close() })
	if err := w.add(""); err != nil {
		t.Fatal(err)
	}
	return w
}

// events reads what w reports until nothing comes for 200 ms, flushing
// unpaired moves as watch does.
func (w *watcher) events(t *testing.T) []string {
	t.Helper()
	var out []string
	add := func(evs []guestproto.WatchEvent) {
		for _, ev := range evs {
			if ev.Type == "rename" {
				out = append(out, "rename "+ev.From+">"+ev.Path)
			} else {
				out = append(out, ev.Type+" "+ev.Path)
			}
		}
	}
	buf := make([]byte, 64<<10)
	for {
		_ = w.f.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			add(w.flushMoves())
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		evs, _ := w.parse(buf[:n])
		add(evs)
	}
}

// upload does to dir/name what writeFile does: a temporary file written,
// chmodded and renamed into place.
func upload(t *testing.T, dir, name string) {
	t.Helper()
	f, err := os.CreateTemp(dir, uploadPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("1"); err != nil {
		t.Fatal(err)
	}
	if err := f.Chmod(0o644); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// An upload shows as its file created and written, never as the
// temporary file it went through; a plain rename stays a rename.
func TestWatchShowsAnUploadAsItsFile(t *testing.T) {
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := newTestWatcher(t, root)
	w.addTree("", nil)
	upload(t, filepath.Join(root, "sub"), "a.txt")
	if err := os.Rename(filepath.Join(root, "sub", "a.txt"), filepath.Join(root, "sub", "b.txt")); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(w.events(t), ", ")
	if want := "create sub/a.txt, write sub/a.txt, rename sub/a.txt>sub/b.txt"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
}

// An upload's temporary file that leaves the tree (or is removed) is no
// event at all, and a directory added with one inside does not list it.
func TestWatchHidesUploadTemporaryFiles(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	w := newTestWatcher(t, root)
	f, err := os.CreateTemp(root, uploadPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Rename(f.Name(), filepath.Join(outside, "gone")); err != nil {
		t.Fatal(err)
	}
	g, err := os.CreateTemp(root, uploadPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if err := os.Remove(g.Name()); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(outside, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := os.CreateTemp(dir, uploadPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := os.Rename(dir, filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.events(t), ", "); got != "create d" {
		t.Fatalf("events %q, want only the directory's create", got)
	}
}
