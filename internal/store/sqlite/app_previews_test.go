package sqlite

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps"
)

// A preview's deploys and release are the app's rows marked with its
// number: the app's own releases never list them (so rollback and
// pruning cannot pick a preview's), deleting the preview takes only its
// own rows, a delivery is recorded once, and deleting the app takes the
// rest.
func TestAppPreviewRecords(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	if err := s.CreateTeam(ctx, pandastack.Team{ID: "team_1", Name: "team_1"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := apps.App{ID: "app_1", TeamID: "team_1", Name: "web", GitURL: "git://x/y.git", Branch: "main", CreatedAt: now}
	if err := s.CreateApp(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, d := range []apps.Deploy{
		{ID: "dep_main", AppID: a.ID, Status: apps.StatusLive, Ref: "main", CreatedAt: now, UpdatedAt: now},
		{ID: "dep_pr7", AppID: a.ID, Status: apps.StatusLive, Ref: "refs/pull/7/head", Preview: 7, DeliveryID: "d-1", CreatedAt: now, UpdatedAt: now},
		{ID: "dep_pr8", AppID: a.ID, Status: apps.StatusBuilding, Ref: "refs/pull/8/head", Preview: 8, CreatedAt: now, UpdatedAt: now},
	} {
		if err := s.PutDeploy(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []apps.Release{
		{ID: "rel_main", AppID: a.ID, DeployID: "dep_main", SnapshotID: "snap_main", MachineID: "sbx_main", Port: 8080, CreatedAt: now},
		{ID: "rel_pr7", AppID: a.ID, DeployID: "dep_pr7", SnapshotID: "snap_pr7", MachineID: "sbx_pr7", Port: 8080, Preview: 7, CreatedAt: now.Add(time.Second)},
	} {
		if err := s.PutRelease(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{7, 8} {
		if err := s.PutPreview(ctx, apps.Preview{AppID: a.ID, Number: n, HeadRef: "feature", HeadSHA: "abc", DeployID: "dep_pr" + string(rune('0'+n)),
			CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	p := apps.Preview{AppID: a.ID, Number: 7, HeadRef: "feature", HeadSHA: "def", DeployID: "dep_pr7", LiveDeployID: "dep_pr7", CreatedAt: now, UpdatedAt: now}
	if err := s.PutPreview(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetPreview(ctx, a.ID, 7); err != nil || got.HeadSHA != "def" || got.LiveDeployID != "dep_pr7" || !got.CreatedAt.Equal(now) {
		t.Fatalf("preview 7 after an update: %+v %v", got, err)
	}
	if _, err := s.GetPreview(ctx, a.ID, 9); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("preview 9: %v, want not found", err)
	}
	rels, err := s.ListReleases(ctx, a.ID)
	if err != nil || len(rels) != 1 || rels[0].ID != "rel_main" {
		t.Fatalf("the app's own releases: %+v %v, want rel_main only", rels, err)
	}
	if rels, err := s.ListPreviewReleases(ctx, a.ID, 7); err != nil || len(rels) != 1 || rels[0].ID != "rel_pr7" || rels[0].Preview != 7 {
		t.Fatalf("preview 7's releases: %+v %v", rels, err)
	}
	if rels, err := s.ListPreviewReleases(ctx, a.ID, 0); err != nil || len(rels) != 1 {
		t.Fatalf("every preview's releases: %+v %v", rels, err)
	}
	if d, err := s.GetDeploy(ctx, a.ID, "dep_pr7"); err != nil || d.Preview != 7 {
		t.Fatalf("preview deploy: %+v %v", d, err)
	}
	if err := s.RecordDelivery(ctx, a.ID, "pr-d-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordDelivery(ctx, a.ID, "pr-d-1"); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Fatalf("a replayed delivery: %v, want conflict", err)
	}

	if err := s.DeletePreview(ctx, a.ID, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetPreview(ctx, a.ID, 7); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("deleted preview: %v", err)
	}
	ds, err := s.ListDeploys(ctx, a.ID)
	if err != nil || len(ds) != 2 {
		t.Fatalf("deploys after deleting preview 7: %+v %v, want the app's and preview 8's", ds, err)
	}
	if rels, _ := s.ListPreviewReleases(ctx, a.ID, 0); len(rels) != 0 {
		t.Fatalf("preview releases after the delete: %+v", rels)
	}
	if rels, _ := s.ListReleases(ctx, a.ID); len(rels) != 1 {
		t.Fatalf("the app's release went with the preview: %+v", rels)
	}
	if err := s.RecordDelivery(ctx, a.ID, "pr-d-1"); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Fatalf("a delivery replayed after its preview closed: %v, want conflict", err)
	}

	if err := s.DeleteApp(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if ps, err := s.ListPreviews(ctx, ""); err != nil || len(ps) != 0 {
		t.Fatalf("previews after the app was deleted: %+v %v", ps, err)
	}
	if err := s.RecordDelivery(ctx, a.ID, "pr-d-2"); err == nil {
		t.Fatal("recorded a delivery of a deleted app")
	}
}
