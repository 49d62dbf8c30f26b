package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

type volume struct {
	ID        string `json:"id"`
	TeamID    string `json:"team_id"`
	Name      string `json:"name"`
	SizeMiB   int    `json:"size_mib"`
	SandboxID string `json:"sandbox_id"`
	MountPath string `json:"mount_path"`
}

func TestVolumes(t *testing.T) {
	env := apitest.Start(t)
	r := call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": "data", "size_mib": 64}})
	wantStatus(t, r, http.StatusCreated)
	v := decode[volume](t, r)
	if v.Name != "data" || v.SizeMiB != 64 || v.SandboxID != "" {
		t.Fatalf("created %+v", v)
	}

	bad := []struct {
		name   string
		body   any
		status int
		code   string
		msg    string
	}{
		{"no name", map[string]any{"size_mib": 64}, 400, "invalid_argument", "name is required"},
		{"too small", map[string]any{"name": "x", "size_mib": 15}, 400, "invalid_argument", "size_mib must be between 16"},
		{"too big", map[string]any{"name": "x", "size_mib": 1<<20 + 1}, 400, "invalid_argument", "size_mib must be between 16"},
		{"unknown field", map[string]any{"name": "x", "size_mib": 64, "sise": 1}, 400, "invalid_argument", "unknown field"},
		{"taken name", map[string]any{"name": "data", "size_mib": 64}, 409, "conflict", `"data" already exists`},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: tt.body})
			wantError(t, r, tt.status, tt.code, tt.msg)
		})
	}

	t.Run("get by id and name, list", func(t *testing.T) {
		for _, ref := range []string{v.ID, "data"} {
			r := call(t, env, req{method: "GET", path: "/v1/volumes/" + ref, key: env.Key})
			wantStatus(t, r, 200)
			if got := decode[volume](t, r); got.ID != v.ID {
				t.Fatalf("GET %s = %+v", ref, got)
			}
		}
		r := call(t, env, req{method: "GET", path: "/v1/volumes", key: env.Key})
		wantStatus(t, r, 200)
		if got := decode[struct{ Volumes []volume }](t, r); len(got.Volumes) != 1 || got.Volumes[0].ID != v.ID {
			t.Fatalf("list = %+v", got)
		}
	})

	t.Run("another team sees nothing", func(t *testing.T) {
		for _, ref := range []string{v.ID, "data"} {
			wantError(t, call(t, env, req{method: "GET", path: "/v1/volumes/" + ref, key: env.OtherKey}), 404, "not_found", "volume "+ref+" not found")
			wantError(t, call(t, env, req{method: "DELETE", path: "/v1/volumes/" + ref, key: env.OtherKey}), 404, "not_found", "not found")
		}
		r := call(t, env, req{method: "GET", path: "/v1/volumes", key: env.OtherKey})
		if got := decode[struct{ Volumes []volume }](t, r); len(got.Volumes) != 0 {
			t.Fatalf("another team lists %+v", got)
		}
	})

	t.Run("mounts at create are checked and passed on", func(t *testing.T) {
		mounts := []struct {
			name  string
			vols  any
			extra map[string]any
			msg   string
		}{
			{"relative path", []map[string]string{{"volume": "data", "path": "data"}}, nil, "absolute path"},
			{"root", []map[string]string{{"volume": "data", "path": "/"}}, nil, "absolute path"},
			{"system dir", []map[string]string{{"volume": "data", "path": "/proc/x"}}, nil, "not under /proc"},
			{"dot dot", []map[string]string{{"volume": "data", "path": "/a/../etc"}}, nil, "/a/../etc"},
			{"no volume", []map[string]string{{"volume": "", "path": "/data"}}, nil, "needs a volume"},
			{"twice", []map[string]string{{"volume": "data", "path": "/a"}, {"volume": "data", "path": "/b"}}, nil, "listed twice"},
			{"same path", []map[string]string{{"volume": "a", "path": "/a"}, {"volume": "b", "path": "/a"}}, nil, "two volumes at /a"},
			{"three", []map[string]string{{"volume": "a", "path": "/a"}, {"volume": "b", "path": "/b"}, {"volume": "c", "path": "/c"}}, nil, "at most 2"},
			{"with a snapshot", []map[string]string{{"volume": "data", "path": "/data"}}, map[string]any{"snapshot": "snap_x"}, "created from a snapshot"},
		}
		for _, m := range mounts {
			body := map[string]any{"template": "base", "volumes": m.vols}
			for k, x := range m.extra {
				body[k] = x
			}
			r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: body})
			wantError(t, r, 400, "invalid_argument", m.msg)
		}
		r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key,
			body: map[string]any{"template": "base", "volumes": []map[string]string{{"volume": "data", "path": "/data"}}}})
		wantStatus(t, r, 201)
		reqs := env.Engine.Created()
		if got := reqs[len(reqs)-1].Volumes; len(got) != 1 || got[0] != (pandastack.VolumeMount{Volume: "data", Path: "/data"}) {
			t.Fatalf("engine got volumes %+v", got)
		}
	})

	t.Run("a sandbox shows the volumes attached to it", func(t *testing.T) {
		sb := newSandbox(t, env, env.Key, nil)
		if err := env.Store.AttachVolume(context.Background(), v.ID, sb.ID, "/data", 0); err != nil {
			t.Fatal(err)
		}
		defer env.Store.DetachVolumes(context.Background(), sb.ID)
		type withVolumes struct {
			ID      string
			Volumes []pandastack.VolumeMount
		}
		got := decode[withVolumes](t, call(t, env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID, key: env.Key}))
		if len(got.Volumes) != 1 || got.Volumes[0] != (pandastack.VolumeMount{Volume: v.ID, Path: "/data"}) {
			t.Fatalf("GET sandbox shows volumes %+v", got.Volumes)
		}
		list := decode[struct{ Sandboxes []withVolumes }](t, call(t, env, req{method: "GET", path: "/v1/sandboxes", key: env.Key}))
		for _, o := range list.Sandboxes {
			if (o.ID == sb.ID) != (len(o.Volumes) == 1) {
				t.Fatalf("list shows %s with volumes %+v", o.ID, o.Volumes)
			}
		}
	})

	t.Run("an attached volume is not deleted", func(t *testing.T) {
		if err := env.Store.AttachVolume(context.Background(), v.ID, "sb_holder", "/data", 0); err != nil {
			t.Fatal(err)
		}
		wantError(t, call(t, env, req{method: "DELETE", path: "/v1/volumes/" + v.ID, key: env.Key}), 409, "conflict", "attached to sandbox sb_holder")
		r := call(t, env, req{method: "GET", path: "/v1/volumes/data", key: env.Key})
		if got := decode[volume](t, r); got.SandboxID != "sb_holder" || got.MountPath != "/data" {
			t.Fatalf("attached volume reads %+v", got)
		}
		if err := env.Store.DetachVolumes(context.Background(), "sb_holder"); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/volumes/data", key: env.Key}), 204)
		wantError(t, call(t, env, req{method: "GET", path: "/v1/volumes/" + v.ID, key: env.Key}), 404, "not_found", "not found")
	})

	t.Run("a full disk is 507", func(t *testing.T) {
		env.Engine.VolumeErr = pandastack.Errorf(pandastack.EInsufficientStorage, "a volume of 64 MiB does not fit")
		defer func() { env.Engine.VolumeErr = nil }()
		r := call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": "big", "size_mib": 64}})
		wantError(t, r, http.StatusInsufficientStorage, "insufficient_storage", "does not fit")
	})
}

// A database's volume is listed with its owner, but the volume API does
// not delete it: it goes with its database.
func TestManagedVolumeIsNotDeletedThroughTheVolumeAPI(t *testing.T) {
	env := apitest.Start(t)
	ctx := context.Background()
	teamID := decode[map[string]any](t, call(t, env, req{method: "GET", path: "/v1/quotas", key: env.Key}))["team_id"]
	tid, _ := teamID.(string)
	if tid == "" {
		r := call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": "probe", "size_mib": 64}})
		tid = decode[volume](t, r).TeamID
	}
	if err := env.Store.CreateVolume(ctx, pandastack.Volume{ID: "vol_db1", TeamID: tid, Name: "db-orders", SizeMiB: 1024,
		ManagedBy: "database:db-orders"}); err != nil {
		t.Fatal(err)
	}
	got := decode[map[string]any](t, call(t, env, req{method: "GET", path: "/v1/volumes/vol_db1", key: env.Key}))
	if got["managed_by"] != "database:db-orders" {
		t.Fatalf("GET shows managed_by %v", got["managed_by"])
	}
	wantError(t, call(t, env, req{method: "DELETE", path: "/v1/volumes/db-orders", key: env.Key}), http.StatusConflict, "conflict",
		"volume db-orders holds the data of database db-orders: it goes when that database is deleted (/v1/databases/db-orders)")
	if _, err := env.Store.GetVolume(ctx, "vol_db1"); err != nil {
		t.Fatalf("after the refused delete: %v", err)
	}
}
