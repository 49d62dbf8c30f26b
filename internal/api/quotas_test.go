package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/quotas"
)

// withDefaults runs the server with the production default quotas.
func withDefaults(c *api.Config) {
	c.Quotas = quotas.New(quotas.Config{Store: c.Store, Defaults: quotas.Defaults})
}

type teamQuotas struct {
	Team              string   `json:"team"`
	TeamID            string   `json:"team_id"`
	MaxSandboxes      int      `json:"max_sandboxes"`
	MaxSnapshots      int      `json:"max_snapshots"`
	MaxVolumes        int      `json:"max_volumes"`
	MaxMemoryMiB      int      `json:"max_memory_mib"`
	RequestsPerSecond float64  `json:"requests_per_second"`
	Burst             int      `json:"burst"`
	Overridden        []string `json:"overridden"`
	Usage             struct {
		Sandboxes int `json:"sandboxes"`
		VCPUs     int `json:"vcpus"`
		MemoryMiB int `json:"memory_mib"`
		Snapshots int `json:"snapshots"`
		Volumes   int `json:"volumes"`
	} `json:"usage"`
}

func setQuotas(t *testing.T, env *apitest.Env, team string, body any) teamQuotas {
	t.Helper()
	r := call(t, env, req{method: "PUT", path: "/v1/teams/" + team + "/quotas", key: env.AdminKey, body: body})
	wantStatus(t, r, http.StatusOK)
	return decode[teamQuotas](t, r)
}

func TestTeamQuotasAPI(t *testing.T) {
	env := apitest.Start(t, withDefaults)
	newSandbox(t, env, env.Key, nil) // base: 1 vCPU, 512 MiB

	r := call(t, env, req{method: "GET", path: "/v1/teams/acme/quotas", key: env.AdminKey})
	wantStatus(t, r, http.StatusOK)
	q := decode[teamQuotas](t, r)
	if q.Team != "acme" || q.MaxSandboxes != quotas.Defaults.MaxSandboxes || q.RequestsPerSecond != quotas.Defaults.RequestsPerSecond || len(q.Overridden) != 0 {
		t.Fatalf("acme's quotas with no overrides = %+v, want the defaults", q)
	}
	if q.Usage.Sandboxes != 1 || q.Usage.VCPUs != 1 || q.Usage.MemoryMiB != 512 {
		t.Fatalf("usage %+v, want the one live sandbox", q.Usage)
	}

	t.Run("set some, keep the rest", func(t *testing.T) {
		q := setQuotas(t, env, "acme", map[string]any{"max_sandboxes": 5, "requests_per_second": 2.5})
		if q.MaxSandboxes != 5 || q.RequestsPerSecond != 2.5 || q.MaxVolumes != quotas.Defaults.MaxVolumes {
			t.Fatalf("after PUT: %+v", q)
		}
		q = setQuotas(t, env, q.TeamID, map[string]any{"max_volumes": 0}) // by id; 0 is no limit
		if q.MaxSandboxes != 5 || q.MaxVolumes != 0 || !slices.Equal(q.Overridden, []string{"max_sandboxes", "max_volumes", "requests_per_second"}) {
			t.Fatalf("after a second PUT: %+v", q)
		}
		q = setQuotas(t, env, "acme", map[string]any{"max_sandboxes": nil})
		if q.MaxSandboxes != quotas.Defaults.MaxSandboxes || slices.Contains(q.Overridden, "max_sandboxes") {
			t.Fatalf("null did not restore the default: %+v", q)
		}
	})

	t.Run("a team key sees its own team's", func(t *testing.T) {
		r := call(t, env, req{method: "GET", path: "/v1/quotas", key: env.Key})
		wantStatus(t, r, http.StatusOK)
		if q := decode[teamQuotas](t, r); q.Team != "acme" || q.MaxVolumes != 0 || q.Usage.Sandboxes != 1 {
			t.Fatalf("own quotas %+v", q)
		}
	})

	bad := []struct {
		name   string
		path   string
		key    string
		body   any
		status int
		code   string
		msg    string
	}{
		{"negative", "/v1/teams/acme/quotas", env.AdminKey, map[string]any{"max_snapshots": -1}, 400, "invalid_argument", "max_snapshots must be between 0"},
		{"fraction", "/v1/teams/acme/quotas", env.AdminKey, map[string]any{"max_vcpus": 1.5}, 400, "invalid_argument", "max_vcpus must be a whole number"},
		{"not a number", "/v1/teams/acme/quotas", env.AdminKey, map[string]any{"burst": "many"}, 400, "invalid_argument", "burst must be a number"},
		{"unknown", "/v1/teams/acme/quotas", env.AdminKey, map[string]any{"max_cats": 1}, 400, "invalid_argument", `unknown quota "max_cats"`},
		{"no such team", "/v1/teams/nobody/quotas", env.AdminKey, map[string]any{"max_volumes": 1}, 404, "not_found", "team nobody not found"},
		{"team key", "/v1/teams/acme/quotas", env.Key, map[string]any{"max_sandboxes": 1000}, 403, "forbidden", "admin"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, env, req{method: "PUT", path: tt.path, key: tt.key, body: tt.body})
			wantError(t, r, tt.status, tt.code, tt.msg)
		})
	}
	// Nothing above changed anything.
	q = decode[teamQuotas](t, call(t, env, req{method: "GET", path: "/v1/teams/acme/quotas", key: env.AdminKey}))
	if q.MaxSnapshots != quotas.Defaults.MaxSnapshots || q.Burst != quotas.Defaults.Burst {
		t.Fatalf("a refused PUT changed the quotas: %+v", q)
	}
}

func TestAdminTeamHasNoLimits(t *testing.T) {
	env := apitest.Start(t, withDefaults)
	q := decode[teamQuotas](t, call(t, env, req{method: "GET", path: "/v1/teams/admin/quotas", key: env.AdminKey}))
	if q.MaxSandboxes != 0 || q.RequestsPerSecond != 0 || q.MaxMemoryMiB != 0 || len(q.Overridden) != 10 {
		t.Fatalf("the bootstrap admin team's quotas = %+v, want every limit overridden to 0 (none)", q)
	}
}

func TestForkCountsAgainstQuota(t *testing.T) {
	env := apitest.Start(t, func(c *api.Config) { c.MaxLiveSandboxesPerTeam = 4 })
	parent := newSandbox(t, env, env.Key, nil)
	fork := func(n int) response {
		return call(t, env, req{method: "POST", path: "/v1/sandboxes/" + parent.ID + "/fork", key: env.Key, body: map[string]any{"count": n}})
	}
	wantError(t, fork(4), http.StatusTooManyRequests, "quota_exceeded", "max_sandboxes is 4; team has 1 live sandboxes and this needs 4 more")
	wantStatus(t, fork(2), http.StatusCreated)
	// The children count: one more fits, then nothing.
	wantStatus(t, call(t, env, req{method: "POST", path: "/v1/sandboxes/" + parent.ID + "/fork", key: env.Key}), http.StatusCreated)
	wantError(t, fork(1), http.StatusTooManyRequests, "quota_exceeded", "team has 4 live sandboxes")
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "base"}})
	wantError(t, r, http.StatusTooManyRequests, "quota_exceeded", "max_sandboxes is 4")
}

func TestMemoryQuota(t *testing.T) {
	env := apitest.Start(t, withDefaults)
	setQuotas(t, env, "acme", map[string]any{"max_memory_mib": 1024})
	newSandbox(t, env, env.Key, nil) // 512 MiB from the template
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "base", "memory_mib": 1024}})
	wantError(t, r, http.StatusTooManyRequests, "quota_exceeded", "max_memory_mib is 1024; team has 512 MiB of memory in live sandboxes and this needs 1024 more")
	newSandbox(t, env, env.Key, map[string]any{"memory_mib": 512})
}

func TestSnapshotAndVolumeQuotas(t *testing.T) {
	env := apitest.Start(t, withDefaults)
	setQuotas(t, env, "acme", map[string]any{"max_snapshots": 1, "max_volumes": 1})
	sb := newSandbox(t, env, env.Key, nil)
	snap := func() response {
		return call(t, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/snapshot", key: env.Key})
	}
	wantStatus(t, snap(), http.StatusCreated)
	wantError(t, snap(), http.StatusTooManyRequests, "quota_exceeded", "max_snapshots is 1; team has 1 snapshots and this needs 1 more")

	vol := func(name string) response {
		return call(t, env, req{method: "POST", path: "/v1/volumes", key: env.Key, body: map[string]any{"name": name, "size_mib": 64}})
	}
	wantStatus(t, vol("a"), http.StatusCreated)
	wantError(t, vol("b"), http.StatusTooManyRequests, "quota_exceeded", "max_volumes is 1; team has 1 volumes")
	// Deleting one frees its place.
	wantStatus(t, call(t, env, req{method: "DELETE", path: "/v1/volumes/a", key: env.Key}), http.StatusNoContent)
	wantStatus(t, vol("b"), http.StatusCreated)
	// Another team has quotas of its own.
	other := newSandbox(t, env, env.OtherKey, nil)
	wantStatus(t, call(t, env, req{method: "POST", path: "/v1/sandboxes/" + other.ID + "/snapshot", key: env.OtherKey}), http.StatusCreated)
}

func TestRateLimit(t *testing.T) {
	env := apitest.Start(t, withDefaults)
	// A very slow refill, so the test does not depend on timing.
	setQuotas(t, env, "acme", map[string]any{"requests_per_second": 0.01, "burst": 2})
	list := func(key string) response {
		return call(t, env, req{method: "GET", path: "/v1/sandboxes", key: key})
	}
	wantStatus(t, list(env.Key), http.StatusOK)
	wantStatus(t, list(env.Key), http.StatusOK)
	r := list(env.Key)
	wantError(t, r, http.StatusTooManyRequests, "rate_limited", "requests_per_second (0.01, burst 2)")
	if got := r.Header.Get("Retry-After"); got != "100" {
		t.Fatalf("Retry-After %q, want 100 (seconds until one token at 0.01/s)", got)
	}
	// Other keys, other teams, the admin and health are not held back.
	wantStatus(t, list(env.OtherKey), http.StatusOK)
	for range 50 {
		wantStatus(t, list(env.AdminKey), http.StatusOK)
	}
	wantStatus(t, call(t, env, req{method: "GET", path: "/v1/health"}), http.StatusOK)
	// Lifting the limit applies at once.
	setQuotas(t, env, "acme", map[string]any{"requests_per_second": 0})
	wantStatus(t, list(env.Key), http.StatusOK)
}
