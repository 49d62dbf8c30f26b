package cacerts_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/cacerts"
)

func writeCA(t *testing.T, dir, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Load bundles every certificate of every file, and names a file that
// holds none or a broken one.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	a, b := writeCA(t, dir, "a"), writeCA(t, dir, "b")
	got, err := cacerts.Load(cacerts.ParseList(a + ", ," + b))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "BEGIN CERTIFICATE"); n != 2 {
		t.Fatalf("%d certificates, want 2", n)
	}
	empty := filepath.Join(dir, "empty.crt")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o644)
	if _, err := cacerts.Load([]string{a, empty}); err == nil || !strings.Contains(err.Error(), empty) {
		t.Errorf("file with no certificate: %v", err)
	}
	broken := filepath.Join(dir, "broken.crt")
	os.WriteFile(broken, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), 0o644)
	if _, err := cacerts.Load([]string{broken}); err == nil || !strings.Contains(err.Error(), broken) {
		t.Errorf("broken certificate: %v", err)
	}
	if _, err := cacerts.Load([]string{filepath.Join(dir, "missing.crt")}); err == nil {
		t.Error("missing file: no error")
	}
}
