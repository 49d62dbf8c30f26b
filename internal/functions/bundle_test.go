package functions

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

func tgz(t *testing.T, entries ...tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, h := range entries {
		body := strings.Repeat("x", int(h.Size))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func TestReadBundle(t *testing.T) {
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("src/app.py")
	io.WriteString(w, "def handler(e, c): return 1\n")
	zw.Close()

	for _, tc := range []struct {
		name  string
		data  []byte
		files []string
		code  string
	}{
		{"tar.gz", tgz(t, tar.Header{Name: "./main.py", Size: 3, Mode: 0o644, Typeflag: tar.TypeReg},
			tar.Header{Name: "lib/", Mode: 0o755, Typeflag: tar.TypeDir}, tar.Header{Name: "lib/x.py", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg}),
			[]string{"main.py", "lib/x.py"}, ""},
		{"zip", zbuf.Bytes(), []string{"src/app.py"}, ""},
		{"climbing out", tgz(t, tar.Header{Name: "../etc/passwd", Size: 1, Typeflag: tar.TypeReg}), nil, pandastack.EInvalid},
		{"a symlink", tgz(t, tar.Header{Name: "l", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink}), nil, pandastack.EInvalid},
		{"not an archive", []byte("hello"), nil, pandastack.EInvalid},
		{"empty", tgz(t), nil, pandastack.EInvalid},
		{"unpacks too big", tgz(t, tar.Header{Name: "big", Size: MaxUnpackedBytes + 1, Typeflag: tar.TypeReg}), nil, pandastack.ETooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readBundle(tc.data, newShimSet(nil))
			if tc.code != "" {
				if pandastack.ErrorCode(err) != tc.code {
					t.Fatalf("err %v, want %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.files {
				if !b.files[f] {
					t.Errorf("file %s missing from %v", f, b.files)
				}
			}
			// The repack holds the code under /var/task and the shims.
			tr := tar.NewReader(bytes.NewReader(b.tar))
			names := map[string]bool{}
			for h, err := tr.Next(); err == nil; h, err = tr.Next() {
				names[h.Name] = true
			}
			for _, f := range tc.files {
				if !names["var/task/"+f] {
					t.Errorf("repack lacks var/task/%s: %v", f, names)
				}
			}
			if !names["opt/pandastack-fn/shim.py"] || !names["opt/pandastack-fn/shim.mjs"] {
				t.Errorf("repack lacks the shims: %v", names)
			}
		})
	}
}

func TestHandlerAndName(t *testing.T) {
	for _, h := range []string{"main.handler", "src/app.run", "index.handler"} {
		if _, _, err := splitHandler(h); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	for _, h := range []string{"handler", "../x.handler", "/abs.handler", "main.", ".handler", "a b.handler"} {
		if _, _, err := splitHandler(h); err == nil {
			t.Errorf("%s accepted", h)
		}
	}
	for _, n := range []string{"a", "hello-world", "f1"} {
		if CheckName(n) != nil {
			t.Errorf("name %s refused", n)
		}
	}
	for _, n := range []string{"", "Hello", "-a", "a-", "a_b", strings.Repeat("a", 64)} {
		if CheckName(n) == nil {
			t.Errorf("name %q accepted", n)
		}
	}
}

// A deploy on a runtime base hands a small bundle's files to the shim:
// its own files (no shim), paths under the code directory, modes kept; a
// bundle past the limit is left to tar.
func TestBundleCodeFiles(t *testing.T) {
	b, err := readBundle(tgz(t, tar.Header{Name: "main.py", Mode: 0o644, Size: 3, Typeflag: tar.TypeReg},
		tar.Header{Name: "lib/util.py", Mode: 0o755, Size: 5, Typeflag: tar.TypeReg}), newShimSet([]byte("addon")))
	if err != nil {
		t.Fatal(err)
	}
	files, ok := b.codeFiles(1 << 20)
	if !ok || len(files) != 2 {
		t.Fatalf("files %+v, ok %v; want main.py and lib/util.py", files, ok)
	}
	got := map[string]string{}
	for _, f := range files {
		body, _ := base64.StdEncoding.DecodeString(f.Data)
		got[f.Path] = string(body)
		if want := map[string]int64{"main.py": 0o644, "lib/util.py": 0o755}[f.Path]; f.Mode != want {
			t.Fatalf("%s mode %o", f.Path, f.Mode)
		}
	}
	if got["main.py"] != "xxx" || got["lib/util.py"] != "xxxxx" {
		t.Fatalf("files %v", got)
	}
	if _, ok := b.codeFiles(7); ok {
		t.Fatal("a bundle past the limit was inlined")
	}
}
