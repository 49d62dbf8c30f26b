package pandastack

import (
	"context"
	"fmt"
	"io"
)

// CACertificate returns the PEM certificate of the server's own CA, which
// signs the certificates of its TLS listener. It needs no API key.
func (c *Client) CACertificate(ctx context.Context) ([]byte, error) {
	resp, err := c.send(ctx, request{method: "GET", path: "/v1/ca.pem", accept: "application/x-pem-file"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("pandastack: read the CA certificate: %w", err)
	}
	return b, nil
}
