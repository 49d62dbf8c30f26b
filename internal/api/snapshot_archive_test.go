package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/snaparchive"
)

// Export and import over the API, with the real archive on a directory
// object store (the fake engine's snapshots get files written here).
func TestSnapshotExportImport(t *testing.T) {
	objects, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	snapDir := t.TempDir()
	env := apitest.Start(t, func(c *api.Config) {
		arch := snaparchive.New(snaparchive.Config{Objects: objects, Store: c.Store, SnapshotDir: snapDir})
		t.Cleanup(arch.Close)
		c.Archive = arch
	})
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "base"}})
	var sb pandastack.Sandbox
	json.Unmarshal(r.Body, &sb)
	r = call(t, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/snapshot", key: env.Key, body: map[string]any{"name": "first"}})
	var sn pandastack.Snapshot
	json.Unmarshal(r.Body, &sn)
	dir := filepath.Join(snapDir, sn.ID)
	os.Mkdir(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "machine.json"), []byte(`{"cpus":1}`), 0o600)
	os.WriteFile(filepath.Join(dir, "state"), []byte("device state"), 0o600)

	if r := call(t, env, req{method: "POST", path: "/v1/snapshots/" + sn.ID + "/export", key: env.OtherKey}); r.Status != 404 {
		t.Fatalf("another team's export: %d %s", r.Status, r.Body)
	}
	r = call(t, env, req{method: "POST", path: "/v1/snapshots/" + sn.ID + "/export", key: env.Key})
	var exp pandastack.Snapshot
	json.Unmarshal(r.Body, &exp)
	if r.Status != 200 || exp.ObjectKey != "snapshots/"+sn.ID || exp.ExportedAt.IsZero() {
		t.Fatalf("export: %d %s", r.Status, r.Body)
	}
	r = call(t, env, req{method: "GET", path: "/v1/snapshots/" + sn.ID, key: env.Key})
	if !strings.Contains(string(r.Body), `"object_key":"snapshots/`+sn.ID) {
		t.Fatalf("the snapshot does not show its export: %s", r.Body)
	}

	for _, c := range []struct {
		name   string
		key    string
		body   any
		status int
		msg    string
	}{
		{"no key", env.OtherKey, map[string]any{}, 400, "object_key is required"},
		{"bad name", env.OtherKey, map[string]any{"object_key": exp.ObjectKey, "name": "bad name!"}, 400, "snapshot name"},
		{"no such export", env.OtherKey, map[string]any{"object_key": "snapshots/snap_nope"}, 404, "no exported snapshot"},
		{"bad key", env.OtherKey, map[string]any{"object_key": "../x"}, 400, "not an export's key"},
		{"name taken", env.Key, map[string]any{"object_key": exp.ObjectKey}, 409, `already exists`},
		{"another team's export", env.OtherKey, map[string]any{"object_key": exp.ObjectKey}, 404, "no exported snapshot"},
		{"an admin imports any", env.AdminKey, map[string]any{"object_key": exp.ObjectKey}, 201, ""},
		{"again, renamed", env.Key, map[string]any{"object_key": sn.ID, "name": "copy"}, 201, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, env, req{method: "POST", path: "/v1/snapshots", key: c.key, body: c.body})
			if r.Status != c.status || !strings.Contains(string(r.Body), c.msg) {
				t.Fatalf("import: %d %s, want %d %q", r.Status, r.Body, c.status, c.msg)
			}
		})
	}
	r = call(t, env, req{method: "GET", path: "/v1/snapshots", key: env.AdminKey})
	if !strings.Contains(string(r.Body), `"name":"first"`) {
		t.Fatalf("the importing team does not list it: %s", r.Body)
	}
}

func TestSnapshotArchiveNotConfigured(t *testing.T) {
	env := apitest.Start(t)
	r := call(t, env, req{method: "POST", path: "/v1/snapshots", key: env.Key, body: map[string]any{"object_key": "snapshots/snap_x"}})
	if r.Status != 503 || !strings.Contains(string(r.Body), "no object storage") {
		t.Fatalf("import without an object store: %d %s", r.Status, r.Body)
	}
}
