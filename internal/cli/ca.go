package cli

import (
	"context"
	"fmt"
	"os"
)

// runCA: `pandastack ca`, the server's CA certificate.
func runCA(ctx context.Context, s *streams, args []string) int {
	p := newParser("ca", "",
		"Print the certificate of the server's own CA (PEM), which signs the certificates of\n"+
			"its TLS listener (--tls-listen). Trust it, e.g.:\n\n"+
			"    pandastack ca -o ca.pem && curl --cacert ca.pem https://8000-sbx_....DOMAIN:8443/").withClient(ctx)
	out := p.fs.String("o", "", "write it to `FILE` instead of stdout")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	pem, err := p.client.client().CACertificate(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *out == "" {
		_, _ = s.out.Write(pem)
		return 0
	}
	if err := os.WriteFile(*out, pem, 0o644); err != nil {
		return fail(s, fmt.Errorf("write %s: %w", *out, err))
	}
	return 0
}
