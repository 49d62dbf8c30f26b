package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/diskreserve"
	"github.com/pandastack/pandastack/internal/quotas"
)

// A team at max_disk_gib gets 429 quota_exceeded naming it for a volume, a
// sandbox with a bigger disk and a hibernation, and nothing is made; GET
// quotas shows what it holds.
func TestDiskQuota(t *testing.T) {
	env := apitest.Start(t, withDefaults)
	setQuotas(t, env, "acme", map[string]any{"max_disk_gib": 3})
	vol := func(name string, mib int) response {
		return call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": name, "size_mib": mib}})
	}
	wantStatus(t, vol("a", 2048), http.StatusCreated)
	wantError(t, vol("b", 1025), http.StatusTooManyRequests, "quota_exceeded",
		"max_disk_gib is 3; team holds 2.0 GiB of disk (root disks of live sandboxes, hibernated memory, volumes, snapshots, app build caches and git repositories) and this needs 1.0 GiB more")
	wantError(t, call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key,
		body: map[string]any{"template": "base", "disk_gib": 2}}), http.StatusTooManyRequests, "quota_exceeded", "max_disk_gib is 3")
	q := decode[struct {
		MaxDiskGiB int          `json:"max_disk_gib"`
		Usage      quotas.Usage `json:"usage"`
	}](t, call(t, env, req{method: "GET", path: "/v1/quotas", key: env.Key}))
	if q.MaxDiskGiB != 3 || q.Usage.Volumes != 1 || q.Usage.DiskMiB < 2048 {
		t.Fatalf("quotas = %+v, want max_disk_gib 3 and the 2048 MiB volume counted", q)
	}
	list := decode[struct {
		Volumes []pandastack.Volume `json:"volumes"`
	}](t, call(t, env, req{method: "GET", path: "/v1/volumes", key: env.Key}))
	if len(list.Volumes) != 1 {
		t.Fatalf("volumes after refusals: %+v, want only a", list.Volumes)
	}
	// Another team is not held back.
	wantStatus(t, call(t, env, req{method: "POST", path: "/v1/volumes", key: env.OtherKey, body: map[string]any{"name": "b", "size_mib": 4096}}), http.StatusCreated)
}

// fullDisk is a storage reserve that is always reached.
type fullDisk struct{}

func (fullDisk) Check(context.Context) error {
	return pandastack.Errorf(pandastack.EInsufficientStorage, "the host's VM storage is at its reserve: 10 MiB free")
}

func (fullDisk) Status() (diskreserve.Status, error) {
	return diskreserve.Status{Dir: "/cow", TotalBytes: 100 << 20, FreeBytes: 10 << 20, ReserveBytes: 20 << 20}, nil
}

// At the storage reserve every new allocation answers 507 (even the
// admin's, who has no quota), what runs keeps answering, and an admin sees
// the reserve in GET quotas (a team's key does not).
func TestStorageReserve(t *testing.T) {
	var full bool
	env := apitest.Start(t, func(c *api.Config) {
		c.Quotas = quotas.New(quotas.Config{Store: c.Store, Defaults: quotas.Defaults, Space: switchable{&full}})
		c.Storage = fullDisk{}
	})
	sb := newSandbox(t, env, env.Key, nil)
	full = true
	for _, r := range []req{
		{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "base"}},
		{method: "POST", path: "/v1/sandboxes", key: env.AdminKey, body: map[string]any{"template": "base"}},
		{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/fork", key: env.Key},
		{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/snapshot", key: env.Key},
		{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/hibernate", key: env.Key},
		{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": "v", "size_mib": 64}},
		{method: "POST", path: "/v1/templates/base/build", key: env.AdminKey},
	} {
		wantError(t, call(t, env, r), http.StatusInsufficientStorage, "insufficient_storage", "at its reserve")
	}
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: env.Key}), http.StatusOK)
	type withStorage struct {
		Storage *diskreserve.Status `json:"storage"`
	}
	if q := decode[withStorage](t, call(t, env, req{method: "GET", path: "/v1/teams/acme/quotas", key: env.AdminKey})); q.Storage == nil || q.Storage.ReserveBytes != 20<<20 {
		t.Fatalf("admin's GET quotas storage = %+v, want the reserve", q.Storage)
	}
	if q := decode[withStorage](t, call(t, env, req{method: "GET", path: "/v1/quotas", key: env.Key})); q.Storage != nil {
		t.Fatalf("a team's key sees the host's storage: %+v", q.Storage)
	}
	full = false
	wantStatus(t, call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": "v", "size_mib": 64}}), http.StatusCreated)
}

// switchable is a storage reserve reached while *full.
type switchable struct{ full *bool }

func (s switchable) Check(ctx context.Context) error {
	if *s.full {
		return fullDisk{}.Check(ctx)
	}
	return nil
}
