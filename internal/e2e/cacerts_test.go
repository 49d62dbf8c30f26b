package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// hostCADir holds the CAs this host trusts beyond Debian's (an HTTPS
// proxy's on these machines).
const hostCADir = "/usr/local/share/ca-certificates"

// hostCAFiles lists the host's local CA certificates.
func hostCAFiles() []string {
	files, _ := filepath.Glob(filepath.Join(hostCADir, "*.crt"))
	return files
}

// hostCAArgs passes the host's local CAs to a server: sandboxes and app
// builds trust what the host does, as an operator behind a proxy would
// configure it.
func hostCAArgs() []string {
	if files := hostCAFiles(); len(files) > 0 {
		return []string{"--extra-ca-certs", strings.Join(files, ",")}
	}
	return nil
}

// A sandbox trusts the server's extra CA certificates: they are in the
// system bundle once (OpenSSL: Python, curl, git) and Node is pointed at
// them (NODE_EXTRA_CA_CERTS).
func TestExtraCACerts(t *testing.T) {
	files := hostCAFiles()
	if len(files) == 0 {
		t.Skip("this host trusts no local CA (" + hostCADir + " is empty): nothing extra to install")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sbx := newSandbox(t, teamClient(t, "team-extra-ca"), sdk.CreateSandboxParams{})
	want, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	firstLine := strings.SplitN(strings.TrimSpace(string(want)), "\n", 3)[1]
	r, err := sbx.Exec(ctx, `grep -c -F "$LINE" /etc/ssl/certs/ca-certificates.crt && grep -c -F "$LINE" "$NODE_EXTRA_CA_CERTS"`, sdk.ExecOptions{Env: map[string]string{"LINE": firstLine}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 || strings.Fields(string(r.Stdout))[0] != "1" {
		t.Fatalf("the host's CA is not (once) in the guest's bundle and NODE_EXTRA_CA_CERTS: exit %d\n%s%s", r.ExitCode, r.Stdout, r.Stderr)
	}
	// Python's default TLS context (OpenSSL's, like curl's and git's)
	// lists it among the CAs it trusts.
	block, _ := pem.Decode(want)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	r, err = sbx.Exec(ctx, `python3 -c 'import os, ssl; print(any(v == os.environ["CN"] for c in ssl.create_default_context().get_ca_certs() for rdn in c["subject"] for k, v in rdn if k == "commonName"))'`,
		sdk.ExecOptions{Env: map[string]string{"CN": cert.Subject.CommonName}})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode != 0 || strings.TrimSpace(string(r.Stdout)) != "True" {
		t.Fatalf("Python's default context does not trust %q: exit %d\n%s%s", cert.Subject.CommonName, r.ExitCode, r.Stdout, r.Stderr)
	}
}
