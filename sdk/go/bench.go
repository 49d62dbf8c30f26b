package pandastack

import (
	"context"
	"net/url"
)

// Ping measures one round trip from the server to the sandbox's guest agent
// and returns it in milliseconds (measured on the server).
func (s *Sandbox) Ping(ctx context.Context) (float64, error) {
	var out struct {
		RTTMs float64 `json:"rtt_ms"`
	}
	err := s.c.do(ctx, request{method: "POST", path: sandboxPath(s.ID) + "/ping"}, &out)
	return out.RTTMs, err
}

// ColdBoot boots a template from its disk image without its snapshot (admin
// keys only) and returns the milliseconds until its guest agent answered: the
// baseline a create is compared with.
func (c *Client) ColdBoot(ctx context.Context, template string) (float64, error) {
	var out struct {
		ColdBootMs float64 `json:"cold_boot_ms"`
	}
	err := c.do(ctx, request{method: "POST", path: "/v1/templates/" + url.PathEscape(template) + "/coldboot"}, &out)
	return out.ColdBootMs, err
}
