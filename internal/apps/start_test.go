package apps_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// After a restart, Start routes every app's host again, fails the
// deploys the previous run left unfinished, with the reason, and sweeps
// the disk of what they and deleted apps left.
func TestStartRestoresRoutesAndFailsUnfinishedDeploys(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	for _, a := range []apps.App{
		{ID: "app_1", TeamID: "team_a", Name: "web", GitURL: "https://example.com/w.git", Branch: "main", CreatedAt: now},
		{ID: "app_2", TeamID: "team_b", Name: "api", GitURL: "https://example.com/a.git", Branch: "main", CreatedAt: now},
	} {
		if err := st.CreateApp(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateApp(ctx, apps.App{ID: "app_3", TeamID: "team_a", Name: "web", GitURL: "x", Branch: "main", CreatedAt: now}); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Fatalf("same name in a team: %v, want conflict", err)
	}
	d := apps.Deploy{ID: "dep_1", AppID: "app_1", Status: apps.StatusBuilding, Ref: "main", Log: "building\n", CreatedAt: now, UpdatedAt: now}
	if err := st.PutDeploy(ctx, d); err != nil {
		t.Fatal(err)
	}
	// On disk: a deploy's work dir and a half-made repository the last
	// run left, the repository of a deleted app, and app_1's own.
	work := t.TempDir()
	left := []string{"deploy-123/src", "repos/app_1.git.new-abc", "repos/app_gone.git"}
	for _, d := range append(left, "repos/app_1.git") {
		if err := os.MkdirAll(filepath.Join(work, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	routes := router.NewTable()
	svc := apps.New(apps.Config{Store: st, Routes: routes, WorkDir: work})
	defer svc.Close()
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"web.apps.localhost", "api.apps.localhost"} {
		rt, ok := routes.Lookup(host)
		if !ok || rt.Kind != router.HTTP || !rt.Access.Public {
			t.Fatalf("%s: route %+v %v", host, rt, ok)
		}
		if _, err := rt.Backend.Dial(ctx); pandastack.ErrorCode(err) != pandastack.EUnavailable {
			t.Errorf("%s before any release: %v, want unavailable", host, err)
		}
	}
	for _, d := range left {
		if _, err := os.Stat(filepath.Join(work, d)); !os.IsNotExist(err) {
			t.Errorf("%s was left after Start: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "repos", "app_1.git")); err != nil {
		t.Errorf("Start removed a live app's repository: %v", err)
	}
	got, err := st.GetDeploy(ctx, "app_1", "dep_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != apps.StatusFailed || got.Error != "the server stopped while it ran" || got.Log == d.Log {
		t.Fatalf("unfinished deploy after Start: %+v", got)
	}
}
