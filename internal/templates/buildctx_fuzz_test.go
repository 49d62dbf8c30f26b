package templates

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// Small bounds for fuzzing: the real ones (2 GiB) are the same code path.
const (
	fuzzMaxBytes   = 4 << 10
	fuzzMaxEntries = 64
)

// FuzzExtractContext extracts arbitrary bytes as an uploaded build context.
func FuzzExtractContext(f *testing.F) {
	for _, script := range contextSeeds {
		f.Add(tarFromScript(script))
	}
	f.Add([]byte("not a tar stream"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkExtract(t, raw)
	})
}

// FuzzExtractContextEntries builds well-formed tar streams from a script
// (one entry a line: TYPE NAME [LINK|SIZE]) so the fuzzer spends its time
// on names, link targets, types and sizes rather than on tar checksums;
// keep, when not zero, cuts the stream to that many bytes (an upload that
// stopped).
func FuzzExtractContextEntries(f *testing.F) {
	for _, script := range contextSeeds {
		f.Add(script, uint16(0))
	}
	f.Fuzz(func(t *testing.T, script string, keep uint16) {
		raw := tarFromScript(script)
		if keep > 0 && int(keep) < len(raw) {
			raw = raw[:keep]
		}
		checkExtract(t, raw)
	})
}

// contextSeeds are scripts for tarFromScript: the e2e test's context and
// the escapes a hostile tenant would try.
var contextSeeds = []string{
	"f .pandastack-spec FROM base\nf app.py print('hi')\nd srv/",
	"f .pandastack-spec FROM base\nl link ../outside\nf link/owned x",
	"f .pandastack-spec FROM base\nl link ../outside/sentinel\nf link x",
	"f .pandastack-spec FROM base\nl abs /etc\nf abs/passwd x",
	"f .pandastack-spec FROM base\nf ../outside/sentinel x\n",
	"f .pandastack-spec FROM base\nf a/../../outside/x x\n",
	"f .pandastack-spec FROM base\nd a\nl a/b ..\nl a/b/c ../..\nf a/b/c/escape x",
	"f .pandastack-spec FROM base\nh hard ../outside/sentinel\nc dev 0\np fifo 0",
	"f .pandastack-spec FROM base\nz big 5000",
	"f .pandastack-spec FROM base\ns sparse 10000000",
	"f .pandastack-spec FROM base\nd a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5/6/7/8/9/A/B/C/D/E/F/G/H/I/J/K/L/M/N/O/P/Q/R/S/T/U/V/W/X/Y/Z/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z",
}

// tarFromScript writes a tar stream: per line "f NAME BODY" (regular
// file), "z NAME SIZE" (zeros), "s NAME SIZE" (a sparse file: a few data
// bytes and a hole of SIZE), "d NAME" (directory), "l NAME TARGET"
// (symlink), "h NAME TARGET" (hard link), "c NAME" (device), "p NAME"
// (fifo). Entries tar refuses to write are skipped.
func tarFromScript(script string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for line := range strings.Lines(script) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(f) < 2 {
			continue
		}
		arg := ""
		if len(f) == 3 {
			arg = f[2]
		}
		h := &tar.Header{Name: f[1], Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		var body []byte
		switch f[0] {
		case "f":
			body = []byte(arg)
		case "z":
			n := 0
			for _, c := range arg {
				if c >= '0' && c <= '9' && n < 1<<20 {
					n = n*10 + int(c-'0')
				}
			}
			body = make([]byte, n)
		case "s":
			h.Typeflag = tar.TypeGNUSparse
			h.Format = tar.FormatGNU
		case "d":
			h.Typeflag = tar.TypeDir
		case "l":
			h.Typeflag, h.Linkname = tar.TypeSymlink, arg
		case "h":
			h.Typeflag, h.Linkname = tar.TypeLink, arg
		case "c":
			h.Typeflag = tar.TypeChar
		case "p":
			h.Typeflag = tar.TypeFifo
		default:
			continue
		}
		h.Size = int64(len(body))
		if tw.WriteHeader(h) != nil {
			continue
		}
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	return buf.Bytes()
}

// checkExtract extracts raw into a directory next to a sentinel file and
// asserts: nothing outside the directory is created or changed, the files
// written stay within the size and entry bounds, and every failure is a
// clear client error (invalid or too large), never an internal one.
func checkExtract(t *testing.T, raw []byte) {
	base := t.TempDir()
	dir := filepath.Join(base, "ctx")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sentinel := filepath.Join(outside, "sentinel")
	if err := os.WriteFile(sentinel, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	var specData []byte
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		specData, err = extractContext(bytes.NewReader(raw), dir, fuzzMaxBytes, fuzzMaxEntries)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("extraction did not finish:\n%s", buf[:runtime.Stack(buf, true)])
	}
	if err != nil {
		if c := pandastack.ErrorCode(err); c != pandastack.EInvalid && c != pandastack.ETooLarge {
			t.Fatalf("extract failed with %q, want a client error: %v", c, err)
		}
	} else if specData == nil {
		t.Fatal("extract succeeded without a spec")
	}
	// Outside the context: only the sentinel, unchanged.
	if ents, _ := os.ReadDir(base); len(ents) != 2 {
		t.Fatalf("entries next to the context: %v", ents)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("entries written outside the context: %v", ents)
	}
	if b, err := os.ReadFile(sentinel); err != nil || string(b) != "untouched" {
		t.Fatalf("file outside the context changed: %q %v", b, err)
	}
	var size int64
	dirs := 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			// ENAMETOOLONG: a tree deeper than PATH_MAX.
			t.Fatalf("walk the extracted context: %v", err)
		}
		if p == dir {
			return nil
		}
		if rel, _ := filepath.Rel(dir, p); len(rel) > MaxContextPath {
			t.Fatalf("extracted a path of %d bytes (bound %d): every level is an inode", len(rel), MaxContextPath)
		}
		if d.IsDir() {
			if dirs++; dirs > fuzzMaxEntries {
				t.Fatalf("extracted more than %d directories", fuzzMaxEntries)
			}
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
			if fi.Mode().Perm()&0o7000 != 0 {
				t.Fatalf("%s has mode %v", p, fi.Mode())
			}
		} else if err == nil && !fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("%s is a %v: only files, directories and symlinks belong in a context", p, fi.Mode().Type())
		}
		return nil
	})
	if size > fuzzMaxBytes {
		t.Fatalf("extracted %d bytes, bound %d", size, fuzzMaxBytes)
	}
}
