package guestimage

import (
	"bytes"
	"io"
	"strconv"
	"testing"
)

// cpioEntry is one entry of a newc archive, as parsed by readNewc.
type cpioEntry struct {
	name                 string
	ino, mode, uid, gid  uint32
	nlink, mtime         uint32
	rdevMajor, rdevMinor uint32
	data                 []byte
}

// readNewc parses a newc cpio archive up to and excluding its trailer,
// checking the format as the kernel's unpacker would.
func readNewc(t *testing.T, archive []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	for {
		if off+newcHeaderLen > len(archive) {
			t.Fatalf("archive ends at %d without a trailer", off)
		}
		h := archive[off : off+newcHeaderLen]
		if string(h[:6]) != "070701" {
			t.Fatalf("bad magic %q at offset %d", h[:6], off)
		}
		var f [13]uint32
		for i := range f {
			v, err := strconv.ParseUint(string(h[6+8*i:6+8*i+8]), 16, 32)
			if err != nil {
				t.Fatalf("header field %d at offset %d: %v", i, off, err)
			}
			f[i] = uint32(v)
		}
		off += newcHeaderLen
		nameSize := int(f[11])
		name := archive[off : off+nameSize]
		if name[nameSize-1] != 0 {
			t.Fatalf("name at offset %d not NUL-terminated", off)
		}
		off = align4(off + nameSize)
		size := int(f[6])
		e := cpioEntry{
			name: string(name[:nameSize-1]),
			ino:  f[0], mode: f[1], uid: f[2], gid: f[3], nlink: f[4], mtime: f[5],
			rdevMajor: f[9], rdevMinor: f[10],
			data: archive[off : off+size],
		}
		off = align4(off + size)
		if e.name == "TRAILER!!!" {
			for _, b := range archive[off:] {
				if b != 0 {
					t.Fatalf("non-zero byte after trailer")
				}
			}
			if len(archive)%512 != 0 {
				t.Errorf("archive length %d not a multiple of 512", len(archive))
			}
			return out
		}
		out = append(out, e)
	}
}

func align4(n int) int { return (n + 3) &^ 3 }

func TestCpioRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := newCpioWriter(&buf)
	files := map[string]string{
		"a":       "",
		"bb":      "x",
		"dir/ccc": "hello, world\n",
		"dddd":    string(bytes.Repeat([]byte{0xAB}, 1001)),
	}
	if err := w.Dir("dir", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "bb", "dir/ccc", "dddd"} {
		if err := w.File(name, 0o640, int64(len(files[name])), bytes.NewReader([]byte(files[name]))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.CharDev("console", 0o600, 5, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ents := readNewc(t, buf.Bytes())
	if len(ents) != 6 {
		t.Fatalf("got %d entries, want 6", len(ents))
	}
	inos := map[uint32]bool{}
	for _, e := range ents {
		if inos[e.ino] || e.ino == 0 {
			t.Errorf("%s: inode %d zero or reused", e.name, e.ino)
		}
		inos[e.ino] = true
		if e.uid != 0 || e.gid != 0 || e.mtime != 0 {
			t.Errorf("%s: uid %d gid %d mtime %d, want zeros", e.name, e.uid, e.gid, e.mtime)
		}
		switch {
		case e.name == "dir":
			if e.mode != 0o040755 || len(e.data) != 0 {
				t.Errorf("dir: mode %o", e.mode)
			}
		case e.name == "console":
			if e.mode != 0o020600 || e.rdevMajor != 5 || e.rdevMinor != 1 {
				t.Errorf("console: mode %o rdev %d:%d", e.mode, e.rdevMajor, e.rdevMinor)
			}
		default:
			if e.mode != 0o100640 {
				t.Errorf("%s: mode %o", e.name, e.mode)
			}
			if string(e.data) != files[e.name] {
				t.Errorf("%s: data %q, want %q", e.name, e.data, files[e.name])
			}
		}
	}
}

func TestCpioShortReader(t *testing.T) {
	w := newCpioWriter(io.Discard)
	if err := w.File("f", 0o644, 10, bytes.NewReader([]byte("short"))); err == nil {
		t.Fatal("File with a short reader succeeded")
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a failed entry succeeded")
	}
}
