// Package cacerts installs extra CA certificates into sandboxes: the
// server's --extra-ca-certs (env PANDASTACK_EXTRA_CA_CERTS), for networks
// where HTTPS to the package registries passes an interception proxy whose
// CA the host trusts and a guest does not (corporate networks look the
// same).
//
// Each new sandbox gets the certificates at GuestPath (Debian's local CA
// directory), appended to the guest's system bundle
// (/etc/ssl/certs/ca-certificates.crt: OpenSSL, Python, curl, git, pip),
// and NODE_EXTRA_CA_CERTS pointing at them in every command's environment
// (Node and npm keep their own root store). Engine does this around
// pandastack.Engine's Create with two file operations and no process, so
// it costs a create a few milliseconds, and nothing when no certificates
// are configured. Sandboxes restored from a snapshot or forked already
// carry the files; the bundle is appended to once.
package cacerts

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/pandastack/pandastack"
)

// Guest paths the certificates are written to.
const (
	GuestPath   = "/usr/local/share/ca-certificates/pandastack-extra.crt"
	GuestBundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Load reads PEM certificates from files (each may hold several) and
// returns them as one PEM bundle. A file that holds no certificate, or
// one that does not parse, is an error naming it.
func Load(files []string) ([]byte, error) {
	var out bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read extra CA certificates: %w", err)
		}
		n := 0
		for {
			var blk *pem.Block
			blk, b = pem.Decode(b)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				continue
			}
			if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
				return nil, fmt.Errorf("extra CA certificate %d of %s: %w", n+1, f, err)
			}
			if err := pem.Encode(&out, blk); err != nil {
				return nil, err
			}
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%s holds no PEM certificate", f)
		}
	}
	return out.Bytes(), nil
}

// ParseList splits FILE[,FILE] and drops empty entries.
func ParseList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Install writes pemBundle into the guest: at GuestPath, and appended to
// GuestBundle unless it is there already.
func Install(ctx context.Context, g pandastack.Guest, pemBundle []byte) error {
	if _, err := g.WriteFile(ctx, GuestPath, 0o644, bytes.NewReader(pemBundle)); err != nil {
		return fmt.Errorf("write %s: %w", GuestPath, err)
	}
	var sys bytes.Buffer
	if err := g.ReadFile(ctx, GuestBundle, &sys, nil); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		return fmt.Errorf("read %s: %w", GuestBundle, err)
	}
	if bytes.Contains(sys.Bytes(), pemBundle) {
		return nil
	}
	if sys.Len() > 0 && !bytes.HasSuffix(sys.Bytes(), []byte("\n")) {
		sys.WriteByte('\n')
	}
	sys.Write(pemBundle)
	if _, err := g.WriteFile(ctx, GuestBundle, 0o644, &sys); err != nil {
		return fmt.Errorf("write %s: %w", GuestBundle, err)
	}
	return nil
}

// Engine is a pandastack.Engine whose creates install PEM into each new
// sandbox. With an empty PEM it is the inner engine unchanged.
type Engine struct {
	pandastack.Engine
	PEM []byte
}

// Create creates the sandbox, then installs the certificates; when that
// fails the sandbox is killed and the error returned.
func (e Engine) Create(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	if len(e.PEM) == 0 {
		return e.Engine.Create(ctx, req)
	}
	env := maps.Clone(req.Env)
	if env == nil {
		env = map[string]string{}
	}
	if _, set := env["NODE_EXTRA_CA_CERTS"]; !set {
		env["NODE_EXTRA_CA_CERTS"] = GuestPath
	}
	req.Env = env
	sb, err := e.Engine.Create(ctx, req)
	if err != nil {
		return sb, err
	}
	g, err := e.Engine.Guest(ctx, sb.ID)
	if err == nil {
		err = Install(ctx, g, e.PEM)
	}
	if err != nil {
		if kerr := e.Engine.Kill(context.WithoutCancel(ctx), sb.ID, pandastack.StateFailed); kerr != nil {
			err = fmt.Errorf("%w (and killing it: %v)", err, kerr)
		}
		return pandastack.Sandbox{}, fmt.Errorf("install extra CA certificates in sandbox %s: %w", sb.ID, err)
	}
	return sb, nil
}
