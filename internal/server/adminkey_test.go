package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminKeyGoesToItsFileNotTheLog(t *testing.T) {
	dir := t.TempDir()
	kp := filepath.Join(dir, "admin-key")
	// An older file with loose permissions is tightened.
	if err := os.WriteFile(kp, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	const key = "pds_0123456789abcdefghijABCDEFGHIJ0123456789"
	if err := writeAdminKey(dir, key, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(kp)
	if err != nil || strings.TrimSpace(string(b)) != key {
		t.Fatalf("admin-key holds %q (%v), want the key", b, err)
	}
	if fi, err := os.Stat(kp); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin-key mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), key[:12]) {
		t.Fatalf("the log shows the key:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), kp) {
		t.Fatalf("the log does not say where the key is:\n%s", logs.String())
	}
}
