package pandastack

import (
	"context"
	"net/url"
	"time"
)

// Key is an API key as listed: never its secret.
type Key struct {
	ID        string     `json:"id"`
	Team      string     `json:"team"`
	TeamID    string     `json:"team_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"` // the secret's first 12 characters
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// ListKeys lists API keys, revoked ones included, oldest first. With an
// admin key it lists every team's, or team's (an id or name) when team is
// not empty; with any other key, its own team's.
func (c *Client) ListKeys(ctx context.Context, team string) ([]Key, error) {
	var q url.Values
	if team != "" {
		q = url.Values{"team": {team}}
	}
	var out struct {
		Keys []Key `json:"keys"`
	}
	if err := c.do(ctx, request{method: "GET", path: "/v1/keys", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Keys, nil
}

// RevokeKey revokes a key: it fails with 401 from the next request on.
// An admin key may revoke any key, any other key its own team's.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, request{method: "DELETE", path: "/v1/keys/" + url.PathEscape(id)}, nil)
}

// RotateKey replaces a key with a new one of the same team, name and role
// and revokes the old one. The new secret (Key) is shown only here.
func (c *Client) RotateKey(ctx context.Context, id string) (*CreatedKey, error) {
	var k CreatedKey
	if err := c.do(ctx, request{method: "POST", path: "/v1/keys/" + url.PathEscape(id) + "/rotate"}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}
