package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/functions"
)

// Functions, versions and invocations round-trip; each deploy is the next
// version; a team sees only its own; a delete takes the invocations too.
func TestFunctionRecords(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	for _, id := range []string{"team_1", "team_2"} {
		if err := s.CreateTeam(ctx, pandastack.Team{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	v := functions.Version{Runtime: "python", Handler: "main.handler", EnvSealed: "sealed", Timeout: 4 * time.Second, MemoryMiB: 512,
		MaxConcurrency: 3, HTTPPublic: true, Isolation: "warm", SnapshotID: "snap_1", BundleSHA256: "abc", BundleBytes: 10, CreatedAt: now}
	f, err := s.AddFunctionVersion(ctx, "team_1", "hello", "fn_1", v)
	if err != nil {
		t.Fatal(err)
	}
	v.SnapshotID = "snap_2"
	f2, err := s.AddFunctionVersion(ctx, "team_1", "hello", "fn_other", v)
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "fn_1" || f.LatestVersion != 1 || f2.ID != "fn_1" || f2.LatestVersion != 2 || f2.Latest.SnapshotID != "snap_2" {
		t.Fatalf("versions: %+v then %+v", f, f2)
	}
	got := f2.Latest
	if got.Timeout != 4*time.Second || !got.HTTPPublic || got.Isolation != "warm" || got.MaxConcurrency != 3 || got.EnvSealed != "sealed" || !got.CreatedAt.Equal(now) {
		t.Fatalf("version round trip: %+v", got)
	}
	if _, err := s.GetFunction(ctx, "team_2", "hello"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("another team's function: %v", err)
	}
	if all, err := s.ListFunctions(ctx, ""); err != nil || len(all) != 1 {
		t.Fatalf("every team's functions: %v %v", all, err)
	}
	if vs, err := s.ListFunctionVersions(ctx, "fn_1"); err != nil || len(vs) != 2 {
		t.Fatalf("versions: %v %v", vs, err)
	}
	end := now.Add(time.Second)
	inv := functions.Invocation{ID: "inv_1", FunctionID: "fn_1", TeamID: "team_1", Version: 2, Trigger: "cron", ExecutionID: "exe_1",
		Status: functions.StatusFailed, Error: &functions.FunctionError{Type: "ValueError", Message: "boom", Stack: "..."}, Logs: "log",
		CreatedAt: now, EndedAt: &end, DurationMs: 1000}
	if err := s.PutInvocation(ctx, inv); err != nil {
		t.Fatal(err)
	}
	inv.Status, inv.Error, inv.Result = functions.StatusSucceeded, nil, json.RawMessage(`{"a":1}`)
	if err := s.PutInvocation(ctx, inv); err != nil {
		t.Fatal(err)
	}
	back, err := s.GetInvocation(ctx, "fn_1", "inv_1")
	if err != nil || back.Status != functions.StatusSucceeded || back.Error != nil || string(back.Result) != `{"a":1}` || back.ExecutionID != "exe_1" || !back.EndedAt.Equal(end) {
		t.Fatalf("invocation round trip: %+v %v", back, err)
	}
	if open, err := s.UnfinishedInvocations(ctx); err != nil || len(open) != 0 {
		t.Fatalf("unfinished: %v %v", open, err)
	}
	if err := s.DeleteFunction(ctx, "fn_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetInvocation(ctx, "fn_1", "inv_1"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("invocation after delete: %v", err)
	}
}

// Functions of the same name in two teams list earliest first, whatever
// order their rows were written in: the HTTP trigger's hostname is
// global, and the server re-registers routes in this order at start, so
// the team that had it keeps it across restarts.
func TestSameNamedFunctionsListEarliestFirst(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	for _, id := range []string{"team_1", "team_2"} {
		if err := s.CreateTeam(ctx, pandastack.Team{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	later := functions.Version{Runtime: "python", Handler: "main.handler", Timeout: time.Second, MemoryMiB: 512, Isolation: "fresh", CreatedAt: t0.Add(time.Second)}
	if _, err := s.AddFunctionVersion(ctx, "team_1", "dup", "fn_a", later); err != nil {
		t.Fatal(err)
	}
	earlier := later
	earlier.CreatedAt = t0
	if _, err := s.AddFunctionVersion(ctx, "team_2", "dup", "fn_b", earlier); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListFunctions(ctx, "")
	if err != nil || len(all) != 2 || all[0].TeamID != "team_2" || all[1].TeamID != "team_1" {
		t.Fatalf("listed %+v %v; want team_2's (made first) before team_1's", all, err)
	}
}
