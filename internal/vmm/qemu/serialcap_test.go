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

// A console log past its cap keeps its newest lines behind a marker line,
// and a writer that appends (QEMU with append=on) goes on right after
// them: no hole, no lost tail.
func TestCapLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, serialLog)
	w, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 100000 {
		fmt.Fprintf(w, "line %06d of a guest printing forever\n", i)
	}
	const max = 1 << 20
	cut, err := capLog(path, max)
	if err != nil {
		t.Fatal(err)
	}
	if cut == 0 {
		t.Fatal("a 3.9 MB log was not cut")
	}
	fmt.Fprintf(w, "after the cut\n")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > max {
		t.Fatalf("log is %d bytes after capping at %d", len(b), max)
	}
	first, rest, _ := bytes.Cut(b, []byte("\n"))
	if want := fmt.Sprintf("[pandastack: console log capped at %d bytes: %d earlier bytes were cut]", max, cut); string(first) != want {
		t.Fatalf("first line %q, want %q", first, want)
	}
	if !bytes.HasPrefix(rest, []byte("line ")) {
		t.Fatalf("kept tail does not start at a line: %q", rest[:40])
	}
	if !bytes.HasSuffix(b, []byte("line 099999 of a guest printing forever\nafter the cut\n")) || bytes.IndexByte(b, 0) >= 0 {
		t.Fatalf("log does not end with the newest line and what was written after the cut (or has a hole): ...%q", b[len(b)-80:])
	}
	// Under the cap nothing changes.
	if cut, err := capLog(path, max); cut != 0 || err != nil {
		t.Fatalf("a capped log cut again: %d, %v", cut, err)
	}
	if cut, err := capLog(filepath.Join(dir, "none"), max); cut != 0 || err != nil {
		t.Fatalf("a missing log: %d, %v", cut, err)
	}
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
