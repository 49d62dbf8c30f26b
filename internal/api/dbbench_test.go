package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/databases"
)

// fakeDatabaseBench stands in for the databases service's pgbench run
// (it needs a database's machine): it answers for database "db-1" only.
type fakeDatabaseBench struct {
	got    databases.PgbenchParams
	floors int
}

func (f *fakeDatabaseBench) MeasureForkFloor(_ context.Context, id string) (databases.ForkFloor, error) {
	if id != "db-1" {
		return databases.ForkFloor{}, pandastack.Errorf(pandastack.ENotFound, "database %s not found", id)
	}
	f.floors++
	return databases.ForkFloor{ForkMs: 300, FirstQueryMs: 400, TotalMs: 700}, nil
}

func (f *fakeDatabaseBench) Pgbench(_ context.Context, id string, p databases.PgbenchParams) (databases.PgbenchResult, error) {
	if id != "db-1" {
		return databases.PgbenchResult{}, pandastack.Errorf(pandastack.ENotFound, "database %s not found", id)
	}
	f.got = p
	return databases.PgbenchResult{PgbenchParams: p, TPS: 1234.5, Transactions: 6172, LatencyMs: 3.2, Version: "17.6"}, nil
}

// TestBenchDatabasePgbench: pgbench inside a database's machine is the
// admin's alone; a team key is forbidden, whoever's database it names.
func TestBenchDatabasePgbench(t *testing.T) {
	fake := &fakeDatabaseBench{}
	env := apitest.Start(t, func(c *api.Config) { c.DatabaseBench = fake })
	path := "/v1/admin/bench/databases/db-1/pgbench"
	wantError(t, call(t, env, req{method: "POST", path: path, key: env.Key, body: map[string]any{"clients": 2}}),
		http.StatusForbidden, "forbidden", "admin API key")
	if fake.got != (databases.PgbenchParams{}) {
		t.Fatalf("a team key ran pgbench: %+v", fake.got)
	}
	r := call(t, env, req{method: "POST", path: path, key: env.AdminKey, body: map[string]any{"clients": 2, "select_only": true}})
	wantStatus(t, r, http.StatusOK)
	if want := (databases.PgbenchParams{Clients: 2, Seconds: 5, SelectOnly: true}); fake.got != want {
		t.Fatalf("ran %+v, want %+v (seconds defaults to 5)", fake.got, want)
	}
	wantError(t, call(t, env, req{method: "POST", path: "/v1/admin/bench/databases/db-2/pgbench", key: env.AdminKey}),
		http.StatusNotFound, "not_found", "not found")
	r = call(t, env, req{method: "POST", path: path, key: env.AdminKey, body: map[string]any{"via": "nic"}})
	wantStatus(t, r, http.StatusOK)
	if fake.got.Via != "nic" {
		t.Fatalf("via nic reached the service as %+v", fake.got)
	}
}

// TestBenchDatabaseForkFloor: a fork floor (a fork of the machine no
// route reaches) is the admin's alone, and answers its parts.
func TestBenchDatabaseForkFloor(t *testing.T) {
	fake := &fakeDatabaseBench{}
	env := apitest.Start(t, func(c *api.Config) { c.DatabaseBench = fake })
	path := "/v1/admin/bench/databases/db-1/fork-floor"
	wantError(t, call(t, env, req{method: "POST", path: path, key: env.Key}), http.StatusForbidden, "forbidden", "admin API key")
	if fake.floors != 0 {
		t.Fatal("a team key forked a database's machine")
	}
	r := call(t, env, req{method: "POST", path: path, key: env.AdminKey})
	wantStatus(t, r, http.StatusOK)
	f := decode[databases.ForkFloor](t, r)
	if f.TotalMs != 700 || f.ForkMs != 300 || f.FirstQueryMs != 400 || fake.floors != 1 {
		t.Fatalf("fork floor %+v after %d measurements", f, fake.floors)
	}
	wantError(t, call(t, env, req{method: "POST", path: "/v1/admin/bench/databases/db-2/fork-floor", key: env.AdminKey}),
		http.StatusNotFound, "not_found", "not found")
}
