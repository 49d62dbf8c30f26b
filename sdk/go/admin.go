package pandastack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"
)

// Template is a baked guest image sandboxes are created from.
type Template struct {
	// TeamID is the team that owns it; "" for the public catalog every
	// team sees.
	TeamID    string    `json:"team_id,omitempty"`
	Name      string    `json:"name"`
	ID        string    `json:"id"`
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskMiB   int       `json:"disk_mib"`
	Accel     string    `json:"accel"`
	BuiltAt   time.Time `json:"built_at"`
	BuildMs   int64     `json:"build_ms"`
	Version   int       `json:"version,omitempty"`
}

// Templates lists the templates sandboxes can be created from.
func (c *Client) Templates(ctx context.Context) ([]Template, error) {
	var out struct {
		Templates []Template `json:"templates"`
	}
	if err := c.do(ctx, request{method: "GET", path: "/v1/templates"}, &out); err != nil {
		return nil, err
	}
	return out.Templates, nil
}

// BuildTemplate builds (or rebuilds) a template, calling onLine (if not nil)
// with each line of the build log as it is produced. It needs an admin key.
func (c *Client) BuildTemplate(ctx context.Context, name string, onLine func(line string)) (Template, error) {
	resp, err := c.send(ctx, request{method: "POST", path: "/v1/templates/" + url.PathEscape(name) + "/build", accept: ndjsonType})
	if err != nil {
		return Template{}, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type     string    `json:"type"`
			Line     string    `json:"line"`
			Template *Template `json:"template"`
			Error    *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Template{}, fmt.Errorf("pandastack: build stream of %s ended early: %w", name, err)
		}
		switch ev.Type {
		case "log":
			if onLine != nil {
				onLine(ev.Line)
			}
		case "done":
			if ev.Template == nil {
				return Template{}, fmt.Errorf("pandastack: build of %s finished without a template", name)
			}
			return *ev.Template, nil
		case "error":
			e := &APIError{Code: ErrInternal.Code, Message: "unknown error", RequestID: resp.Header.Get("X-Request-Id")}
			if ev.Error != nil {
				e.Code, e.Message = ev.Error.Code, ev.Error.Message
			}
			return Template{}, e
		}
	}
}

// CreatedKey is a new API key. Key is the secret, shown only once.
type CreatedKey struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	Admin  bool   `json:"admin"`
}

// CreateKey makes an API key for a team (created if it does not exist). It
// needs an admin key. name may be empty.
func (c *Client) CreateKey(ctx context.Context, team, name string) (*CreatedKey, error) {
	return c.createKey(ctx, team, name, false)
}

// CreateE2BKey is CreateKey for a key in E2B's shape (e2b_ and 40 hex), the
// E2B_API_KEY of the stock E2B SDKs; it works with this API too.
func (c *Client) CreateE2BKey(ctx context.Context, team, name string) (*CreatedKey, error) {
	return c.createKey(ctx, team, name, true)
}

func (c *Client) createKey(ctx context.Context, team, name string, e2b bool) (*CreatedKey, error) {
	body := struct {
		Team string `json:"team"`
		Name string `json:"name,omitempty"`
		E2B  bool   `json:"e2b,omitempty"`
	}{team, name, e2b}
	var k CreatedKey
	if err := c.do(ctx, request{method: "POST", path: "/v1/keys", body: body}, &k); err != nil {
		return nil, err
	}
	return &k, nil
}
