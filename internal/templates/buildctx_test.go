package templates

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

type tarEntry struct {
	name, body, link string
	dir              bool
}

func makeTar(t *testing.T, entries ...tarEntry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	return &buf
}

func TestExtractContextRefusesEscapes(t *testing.T) {
	for _, name := range []string{"../evil", "/etc/evil", "a/../../evil"} {
		dir := t.TempDir()
		_, err := ExtractContext(makeTar(t, tarEntry{name: SpecEntry, body: "FROM base\n"}, tarEntry{name: name, body: "x"}), dir)
		if pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("entry %q: err = %v, want invalid_argument", name, err)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
			t.Errorf("entry %q was written outside the context", name)
		}
	}
	_, err := ExtractContext(makeTar(t, tarEntry{name: "a", body: "x"}), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no spec") {
		t.Errorf("tar without a spec: %v", err)
	}
}

func TestCopySourcesStayInTheContext(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s3cret"), 0o600)
	dir := t.TempDir()
	spec, err := ExtractContext(makeTar(t,
		tarEntry{name: SpecEntry, body: "FROM base\n"},
		tarEntry{name: "app/", dir: true},
		tarEntry{name: "app/main.py", body: "print(1)\n"},
		tarEntry{name: "app/lib/util.py", body: "X = 1\n"},
		tarEntry{name: "inside", link: "app/main.py"},
		tarEntry{name: "escape", link: filepath.Join(outside, "secret")},
		tarEntry{name: "escape2", link: "../../../../../../../../etc/passwd"},
		tarEntry{name: "app/sneaky", link: "../escape"},
	), dir)
	if err != nil || string(spec) != "FROM base\n" {
		t.Fatalf("extract: %q, %v", spec, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	isDir, files, err := copyFiles(root, "app/main.py")
	if err != nil || isDir || len(files) != 1 {
		t.Fatalf("file source: %v %v %v", isDir, files, err)
	}
	if _, _, err := copyFiles(root, "inside"); err != nil {
		t.Errorf("a link inside the context was refused: %v", err)
	}
	for _, src := range []string{"escape", "escape2", "missing"} {
		_, _, err := copyFiles(root, src)
		if pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("COPY %s: err = %v, want invalid_argument", src, err)
		}
	}
	if _, err := copyHash(root, "escape"); err == nil || !strings.Contains(err.Error(), "outside the build context") {
		t.Errorf("COPY through an escaping link: %v", err)
	}
	// A directory holding a link that escapes is refused as a whole.
	if _, _, err := copyFiles(root, "app"); err == nil {
		t.Errorf("COPY app (holding a link out of the context) was accepted")
	}
}

func TestCopyHashFollowsContent(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "a"), []byte("one"), 0o644)
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	h1, err := copyHash(root, "d")
	if err != nil {
		t.Fatal(err)
	}
	if h2, _ := copyHash(root, "d"); h2 != h1 {
		t.Fatal("hash of unchanged content changed")
	}
	os.WriteFile(filepath.Join(dir, "d", "a"), []byte("two"), 0o644)
	if h3, _ := copyHash(root, "d"); h3 == h1 {
		t.Fatal("hash did not change with the content")
	}
	os.Chmod(filepath.Join(dir, "d", "a"), 0o755)
	h4, _ := copyHash(root, "d")
	os.Chmod(filepath.Join(dir, "d", "a"), 0o644)
	if h5, _ := copyHash(root, "d"); h4 == h5 {
		t.Fatal("hash did not change with the mode")
	}
}
