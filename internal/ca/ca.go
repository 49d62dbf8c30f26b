// Package ca is the server's own certificate authority. It is made at the
// first start under the data directory (the key 0600, never logged),
// constrained to the server's domains, and issues leaf certificates on
// demand for names under those domains, caching them. Clients trust the
// server by adding the CA certificate (served at GET /v1/ca.pem).
package ca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Lifetimes of the CA and of the leaves it issues; a cached leaf is issued
// again a day before it expires.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	leafLifetime = 90 * 24 * time.Hour
	leafRenew    = 24 * time.Hour
	// maxLeaves bounds the cache: clients choose the names (any
	// PORT-ID label under the domain), so it must not grow without end.
	maxLeaves = 4096
)

// File names under the CA's directory.
const (
	CertFile = "ca.pem"
	KeyFile  = "ca-key.pem"
)

// CA issues certificates for names under its domains.
type CA struct {
	dir     string
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	domains []string

	// leafKey is the key of every leaf this process issues: it lives in
	// memory only, and issuing a leaf costs one signature, not a key.
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// Open loads the CA kept in dir, or makes one constrained to domains when
// dir holds none. A CA made for other domains is an error that says how to
// start over: a new CA must be trusted again by every client.
func Open(dir string, domains []string) (*CA, error) {
	var ds []string
	for _, d := range domains {
		if d = strings.ToLower(strings.Trim(d, ".")); d != "" && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return nil, errors.New("open CA: no domain to issue for")
	}
	c := &CA{dir: dir, domains: ds, leaves: map[string]*tls.Certificate{}}
	certPEM, err := os.ReadFile(filepath.Join(dir, CertFile))
	if errors.Is(err, os.ErrNotExist) {
		err = c.create()
	} else if err == nil {
		err = c.load(certPEM)
	}
	if err != nil {
		return nil, err
	}
	if c.leafKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, fmt.Errorf("generate leaf key: %w", err)
	}
	for _, d := range ds {
		if !c.covers(d) {
			return nil, fmt.Errorf("open CA: %s was made for %s, not %s; move it away to make a new one (clients must then trust the new certificate)",
				filepath.Join(dir, CertFile), strings.Join(c.cert.PermittedDNSDomains, ", "), d)
		}
	}
	return c, nil
}

// create makes a new CA: an ECDSA P-256 key and a self-signed certificate
// whose name constraints permit only the domains.
func (c *CA) create() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return fmt.Errorf("create CA dir: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial(),
		Subject:                     pkix.Name{Organization: []string{"PandaStack"}, CommonName: "PandaStack CA " + c.domains[0]},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caLifetime),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         c.domains,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return fmt.Errorf("create CA certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode CA key: %w", err)
	}
	// The key first, so that a certificate on disk always has its key.
	if err := writeFile(filepath.Join(c.dir, KeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeFile(filepath.Join(c.dir, CertFile), certPEM, 0o644); err != nil {
		return err
	}
	return c.load(certPEM)
}

// load reads the CA certificate from certPEM and its key from the key file.
func (c *CA) load(certPEM []byte) error {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return fmt.Errorf("read CA: %s holds no PEM certificate", filepath.Join(c.dir, CertFile))
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return fmt.Errorf("read CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(c.dir, KeyFile))
	if err != nil {
		return fmt.Errorf("read CA key: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return fmt.Errorf("read CA key: %s holds no PEM key", filepath.Join(c.dir, KeyFile))
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return fmt.Errorf("read CA key: %w", err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok || !publicKeysEqual(signer.Public(), cert.PublicKey) {
		return fmt.Errorf("read CA: the key in %s does not match the certificate", filepath.Join(c.dir, KeyFile))
	}
	c.cert, c.key, c.certPEM = cert, signer, certPEM
	return nil
}

// covers reports whether the CA's constraints permit name (a domain and
// every name under it).
func (c *CA) covers(name string) bool {
	for _, d := range c.cert.PermittedDNSDomains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

// CertPEM is the CA certificate, PEM-encoded.
func (c *CA) CertPEM() []byte { return c.certPEM }

// CertPath is the file holding the CA certificate.
func (c *CA) CertPath() string { return filepath.Join(c.dir, CertFile) }

// Certificate returns a certificate for name, issuing it on first use and
// again shortly before it expires. A name outside the domains is EInvalid.
func (c *CA) Certificate(name string) (*tls.Certificate, error) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if !c.issues(name) {
		return nil, pandastack.Errorf(pandastack.EInvalid, "the server's CA issues certificates under %s only, not for %q", strings.Join(c.domains, ", "), name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaves[name]; ok && time.Until(l.Leaf.NotAfter) > leafRenew {
		return l, nil
	}
	l, err := c.issue(name)
	if err != nil {
		return nil, err
	}
	if len(c.leaves) >= maxLeaves {
		for n := range c.leaves { // any one: it is issued again if asked for
			delete(c.leaves, n)
			break
		}
	}
	c.leaves[name] = l
	return l, nil
}

// issues reports whether name lies under one of the configured domains.
func (c *CA) issues(name string) bool {
	if name == "" || strings.ContainsAny(name, " /*:") {
		return false
	}
	for _, d := range c.domains {
		if name == d || strings.HasSuffix(name, "."+d) {
			return true
		}
	}
	return false
}

func (c *CA) issue(name string) (*tls.Certificate, error) {
	key := c.leafKey
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, key.Public(), c.key)
	if err != nil {
		return nil, fmt.Errorf("issue certificate for %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("issue certificate for %s: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	ea, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ea.Equal(b)
}

// writeFile writes a file whole with the given mode: a temporary file
// renamed over the name, so a crash leaves the old file or the new one.
func writeFile(path string, b []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
