package ca_test

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/ca"
)

func pool(t *testing.T, c *ca.CA) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(c.CertPEM()) {
		t.Fatal("the CA's PEM holds no certificate")
	}
	return p
}

func TestFirstOpenMakesTheCAAndLaterOnesKeepIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	c, err := ca.Open(dir, []string{"Example.COM."})
	if err != nil {
		t.Fatal(err)
	}
	for name, mode := range map[string]os.FileMode{ca.KeyFile: 0o600, ca.CertFile: 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %v %v, want mode %v", name, fi, err, mode)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("CA dir mode %v, want 0700", fi.Mode().Perm())
	}
	if c.CertPath() != filepath.Join(dir, ca.CertFile) {
		t.Errorf("CertPath %s", c.CertPath())
	}
	b, _ := pem.Decode(c.CertPEM())
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil || !cert.IsCA || strings.Join(cert.PermittedDNSDomains, ",") != "example.com" {
		t.Fatalf("CA certificate %v: IsCA %v, constraints %v", err, cert.IsCA, cert.PermittedDNSDomains)
	}
	again, err := ca.Open(dir, []string{"example.com"})
	if err != nil || !bytes.Equal(again.CertPEM(), c.CertPEM()) {
		t.Fatalf("reopen: %v; same certificate %v", err, bytes.Equal(again.CertPEM(), c.CertPEM()))
	}
	if _, err := ca.Open(dir, []string{"other.org"}); err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("a CA made for example.com opened for other.org: %v", err)
	}
}

func TestLeavesVerifyAgainstTheCA(t *testing.T) {
	c, err := ca.Open(t.TempDir(), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "8000-sbx_0123456789abcdef0123.localhost", "web.apps.localhost", "DB1.db.Localhost."} {
		t.Run(name, func(t *testing.T) {
			l, err := c.Certificate(name)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ToLower(strings.TrimSuffix(name, "."))
			if _, err := l.Leaf.Verify(x509.VerifyOptions{DNSName: want, Roots: pool(t, c)}); err != nil {
				t.Fatalf("verify %s: %v", want, err)
			}
			if again, _ := c.Certificate(name); again != l {
				t.Error("a second call issued a new certificate instead of the cached one")
			}
		})
	}
	for _, name := range []string{"example.com", "localhost.evil.com", "evillocalhost", "*.localhost", ""} {
		if _, err := c.Certificate(name); pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("%q: %v, want invalid_argument", name, err)
		}
	}
}

// Clients choose the names a TLS listener asks certificates for: the cache
// stays bounded however many they try.
func TestLeafCacheIsBounded(t *testing.T) {
	c, err := ca.Open(t.TempDir(), []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := c.Certificate("1-sbx_00.localhost")
	for i := 2; i <= ca.MaxLeaves+1; i++ {
		if _, err := c.Certificate(fmt.Sprintf("%d-sbx_00.localhost", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Cached(); n != ca.MaxLeaves {
		t.Fatalf("%d certificates cached, want at most %d", n, ca.MaxLeaves)
	}
	if again, _ := c.Certificate("1-sbx_00.localhost"); again == nil || again.Leaf.DNSNames[0] != first.Leaf.DNSNames[0] {
		t.Fatal("an evicted name is not issued again")
	}
}
