package pandastack

import (
	"context"
	"net/url"
	"time"
)

// Volume is a durable disk: created once, mounted in a sandbox at create,
// its data outlives the sandbox (kill, hibernate, server restart).
type Volume struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"team_id"`
	Name      string    `json:"name"`
	SizeMiB   int       `json:"size_mib"`
	CreatedAt time.Time `json:"created_at"`
	SandboxID string    `json:"sandbox_id"` // the live sandbox it is attached to ("" when free)
	MountPath string    `json:"mount_path,omitempty"`
	Host      string    `json:"host"`
	// ManagedBy names the platform service whose volume it is ("database:ID"):
	// it attaches only to that service's machines and goes with it.
	ManagedBy string `json:"managed_by,omitempty"`
}

// VolumeMount mounts a volume (by id or name) at Path in a new sandbox.
type VolumeMount struct {
	Volume string `json:"volume"`
	Path   string `json:"path"`
}

// CreateVolume makes an empty volume of sizeMiB (16 MiB to 1 TiB). A size
// beyond the host's free disk fails with code "insufficient_storage" (507);
// a taken name with "conflict" (409).
func (c *Client) CreateVolume(ctx context.Context, name string, sizeMiB int) (*Volume, error) {
	body := struct {
		Name    string `json:"name"`
		SizeMiB int    `json:"size_mib"`
	}{name, sizeMiB}
	v := &Volume{}
	if err := c.do(ctx, request{method: "POST", path: "/v1/volumes", body: body}, v); err != nil {
		return nil, err
	}
	return v, nil
}

// ListVolumes lists the team's volumes, oldest first.
func (c *Client) ListVolumes(ctx context.Context) ([]Volume, error) {
	var out struct {
		Volumes []Volume `json:"volumes"`
	}
	err := c.do(ctx, request{method: "GET", path: "/v1/volumes"}, &out)
	return out.Volumes, err
}

// GetVolume fetches a volume by id or name.
func (c *Client) GetVolume(ctx context.Context, idOrName string) (*Volume, error) {
	v := &Volume{}
	if err := c.do(ctx, request{method: "GET", path: "/v1/volumes/" + url.PathEscape(idOrName)}, v); err != nil {
		return nil, err
	}
	return v, nil
}

// DeleteVolume deletes a volume and its data (by id or name). One attached
// to a live sandbox fails with "conflict" (409).
func (c *Client) DeleteVolume(ctx context.Context, idOrName string) error {
	return c.do(ctx, request{method: "DELETE", path: "/v1/volumes/" + url.PathEscape(idOrName)}, nil)
}
