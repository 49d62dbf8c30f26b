package qemu

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A console log past its cap keeps its newest bytes behind a marker
// line, and a writer that appends (QEMU with append=on) goes on right
// after them, even while the log is being cut: no hole, nothing lost at
// the end, nothing before the marker.
func TestCapLog(t *testing.T) {
	for _, tt := range []struct {
		name string
		cap  func(path string, max int64) (int64, error)
	}{
		{"in place", capLog},
		{"rewritten", capByRewrite},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), serialLog)
			w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			const max = 1 << 20
			for i := range 100000 {
				fmt.Fprintf(w, "line %06d of a guest printing forever\n", i)
			}
			cut, err := tt.cap(path, max)
			if err != nil {
				t.Fatal(err)
			}
			if cut == 0 {
				t.Fatal("a 3.9 MB log was not cut")
			}
			fmt.Fprintf(w, "after the cut\n")
			b := checkCapped(t, path, max)
			if want := fmt.Sprintf("[pandastack: console log capped at %d bytes: %d earlier bytes were cut]", max, cut); !bytes.HasPrefix(b, []byte(want)) {
				t.Fatalf("log starts %q, want the marker %q", b[:min(len(b), 100)], want)
			}
			if !bytes.HasSuffix(b, []byte("line 099999 of a guest printing forever\nafter the cut\n")) {
				t.Fatalf("log does not end with the newest line and what was written after the cut: ...%q", b[len(b)-80:])
			}
			// Under the cap nothing changes.
			if cut, err := tt.cap(path, max); cut != 0 || err != nil {
				t.Fatalf("a capped log cut again: %d, %v", cut, err)
			}
			if cut, err := tt.cap(filepath.Join(t.TempDir(), "none"), max); cut != 0 || err != nil {
				t.Fatalf("a missing log: %d, %v", cut, err)
			}
		})
	}

	t.Run("while the guest writes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), serialLog)
		w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		const max = 256 << 10
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 200000 {
				fmt.Fprintf(w, "line %06d\n", i)
			}
		}()
		cuts := 0
		for running := true; running; {
			select {
			case <-done:
				running = false
			default:
			}
			if cut, err := capLog(path, max); err != nil {
				t.Fatal(err)
			} else if cut > 0 {
				cuts++
			}
		}
		if cuts == 0 {
			t.Skip("the writer finished before the log reached its cap")
		}
		if _, err := capLog(path, max); err != nil {
			t.Fatal(err)
		}
		b := checkCapped(t, path, max)
		if !bytes.HasPrefix(b, []byte("[pandastack: console log capped")) || !bytes.HasSuffix(b, []byte("line 199999\n")) {
			t.Fatalf("after %d cuts while writing: starts %q, ends %q", cuts, b[:60], b[len(b)-30:])
		}
		// Between the marker and the end, every line follows the one before.
		lines := strings.Split(strings.TrimSpace(string(b[bytes.IndexByte(b, '\n')+1:])), "\n")
		var prev int
		for k, l := range lines[1:] { // the first may be cut mid-line
			var n int
			if _, err := fmt.Sscanf(l, "line %d", &n); err != nil || (k > 0 && n != prev+1) {
				t.Fatalf("line %q after line %d: lost or reordered output", l, prev)
			}
			prev = n
		}
	})
}

// checkCapped reads the log at path and checks it is at most max bytes
// with no hole (NUL bytes).
func checkCapped(t *testing.T, path string, max int) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > max {
		t.Fatalf("log is %d bytes after capping at %d", len(b), max)
	}
	if bytes.IndexByte(b, 0) >= 0 {
		t.Fatalf("log has a hole (NUL bytes) at %d", bytes.IndexByte(b, 0))
	}
	return b
}

// The VM's directory belongs to its uid: a serial.log it replaced with a
// symlink, a FIFO or a hard link is left alone, never followed or
// truncated.
func TestCapLogLeavesOtherFilesAlone(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, bytes.Repeat([]byte("x"), 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "symlink", serialLog)
	os.MkdirAll(filepath.Dir(link), 0o700)
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard", serialLog)
	os.MkdirAll(filepath.Dir(hard), 0o700)
	if err := os.Link(victim, hard); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo", serialLog)
	os.MkdirAll(filepath.Dir(fifo), 0o700)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, hard, fifo} {
		if _, err := capLog(p, 100); err == nil {
			t.Errorf("%s: capped, want it left alone with an error", p)
		} else if !strings.Contains(err.Error(), "not a plain file") && !strings.Contains(err.Error(), "symbolic link") && !strings.Contains(err.Error(), "too many levels") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if fi, err := os.Stat(victim); err != nil || fi.Size() != 4096 {
		t.Fatalf("the link's target was changed: %v %v", fi, err)
	}
}
