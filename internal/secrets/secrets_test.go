package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpensOnlyWithItsKeyAndRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.key")
	b, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != KeySize {
		t.Fatalf("key file: %v %v", fi, err)
	}
	sealed, err := b.Seal("hunter2", "db:1:password")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "hunter2") {
		t.Fatalf("sealed value shows the plaintext: %s", sealed)
	}
	again, _ := b.Seal("hunter2", "db:1:password")
	if again == sealed {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	// The same file opens it after a restart.
	b2, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b2.Open(sealed, "db:1:password"); err != nil || got != "hunter2" {
		t.Fatalf("open after reload: %q %v", got, err)
	}
	// Another record's field does not open it.
	if _, err := b2.Open(sealed, "db:2:password"); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened with another record's aad: %v", err)
	}
	// Another key does not open it.
	other, err := LoadOrCreate(filepath.Join(dir, "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(sealed, "db:1:password"); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened with another key: %v", err)
	}
	// Altered bytes do not open.
	flipped := sealed[:len(sealed)-2] + "AA"
	if flipped == sealed {
		flipped = sealed[:len(sealed)-2] + "BB"
	}
	if _, err := b.Open(flipped, "db:1:password"); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened an altered value: %v", err)
	}
	if _, err := b.Open("hunter2", "db:1:password"); !errors.Is(err, ErrOpen) {
		t.Fatalf("opened a plaintext value: %v", err)
	}
}

func TestKeyFileReadableByOthersIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	if _, err := LoadOrCreate(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreate(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key was accepted: %v", err)
	}
}

func TestWrongKeySizeIsRefused(t *testing.T) {
	if _, err := New(make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
}
