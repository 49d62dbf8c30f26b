package file_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/objstore"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/objstore/objstoretest"
)

func TestConformance(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Store {
		s, err := file.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// A symbolic link planted inside the directory cannot lead a key outside.
func TestKeysStayInsideTheRoot(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o600)
	s, err := file.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Symlink(outside, filepath.Join(dir, "objects", "data", "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Get(ctx, "link/secret"); err == nil {
		t.Fatal("Get through a symlink out of the root succeeded")
	}
	if err := s.Put(ctx, "link/planted", strings.NewReader("x")); err == nil {
		t.Fatal("Put through a symlink out of the root succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Fatal("a Put wrote outside the root")
	}
}

// A Put interrupted by a crash leaves a temporary file, which the next
// Open removes; it is never listed.
func TestOpenClearsUnfinishedPuts(t *testing.T) {
	dir := t.TempDir()
	s, err := file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	os.WriteFile(filepath.Join(dir, "tmp", "put-leftover"), []byte("half"), 0o600)
	s, err = file.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Fatalf("tmp holds %d entries after Open", len(ents))
	}
	if list, _ := s.List(context.Background(), ""); len(list) != 0 {
		t.Fatalf("List = %v", list)
	}
}
