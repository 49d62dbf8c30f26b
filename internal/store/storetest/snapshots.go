package storetest

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

func snapshot(id, team, name string) pandastack.Snapshot {
	return pandastack.Snapshot{ID: id, TeamID: team, Name: name, SandboxID: "sbx_src", Template: "base",
		TemplateID: "tpl_base_1", Host: "local", SizeBytes: 1 << 30, CreatedAt: at(40)}
}

func (h *harness) snapshots(t *testing.T) {
	t.Run("RoundTripListDelete", func(t *testing.T) {
		s := h.newStore(t)
		a := snapshot("snap_a", "team_1", "one")
		b := snapshot("snap_b", "team_1", "two")
		b.CreatedAt = at(41)
		c := snapshot("snap_c", "team_2", "one") // names are per team
		for _, sn := range []pandastack.Snapshot{a, b, c} {
			mustNot(t, s.CreateSnapshot(t.Context(), sn), "create snapshot "+sn.ID)
		}
		got, err := s.GetSnapshot(t.Context(), "snap_a")
		mustNot(t, err, "get snapshot")
		if !got.CreatedAt.Equal(a.CreatedAt) {
			t.Errorf("created_at %v, want %v", got.CreatedAt, a.CreatedAt)
		}
		got.CreatedAt = a.CreatedAt
		if got != a {
			t.Errorf("round trip: got %+v, want %+v", got, a)
		}
		list, err := s.ListSnapshots(t.Context(), "team_1")
		mustNot(t, err, "list snapshots")
		if len(list) != 2 || list[0].ID != "snap_a" || list[1].ID != "snap_b" {
			t.Errorf("team_1 lists %+v", list)
		}
		all, err := s.ListSnapshots(t.Context(), "")
		mustNot(t, err, "list every team's snapshots")
		if len(all) != 3 || all[0].ID != "snap_a" || all[1].ID != "snap_c" || all[2].ID != "snap_b" {
			t.Errorf("every team lists %+v", all)
		}
		empty, err := s.ListSnapshots(t.Context(), "team_none")
		mustNot(t, err, "list snapshots of an unknown team")
		if empty == nil || len(empty) != 0 {
			t.Errorf("unknown team lists %#v, want an empty non-nil slice", empty)
		}
		mustNot(t, s.DeleteSnapshot(t.Context(), "snap_a"), "delete snapshot")
		_, err = s.GetSnapshot(t.Context(), "snap_a")
		wantCode(t, err, pandastack.ENotFound, "GetSnapshot after delete")
		wantCode(t, s.DeleteSnapshot(t.Context(), "snap_a"), pandastack.ENotFound, "second delete")
	})

	t.Run("NameTakenInTeam", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateSnapshot(t.Context(), snapshot("snap_a", "team_1", "one")), "create snapshot")
		err := s.CreateSnapshot(t.Context(), snapshot("snap_b", "team_1", "one"))
		wantCode(t, err, pandastack.EConflict, "same name in the same team")
		if _, err := s.GetSnapshot(t.Context(), "snap_b"); pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Errorf("the refused snapshot was stored: %v", err)
		}
	})

	t.Run("ExportRecorded", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateSnapshot(t.Context(), snapshot("snap_a", "team_1", "one")), "create snapshot")
		got, err := s.GetSnapshot(t.Context(), "snap_a")
		mustNot(t, err, "get snapshot")
		if got.ObjectKey != "" || !got.ExportedAt.IsZero() || got.ExportError != "" {
			t.Fatalf("a new snapshot is exported: %+v", got)
		}
		mustNot(t, s.SetSnapshotExport(t.Context(), "snap_a", "", time.Time{}, "object store unreachable"), "record a failed export")
		got, _ = s.GetSnapshot(t.Context(), "snap_a")
		if got.ExportError != "object store unreachable" || got.ObjectKey != "" {
			t.Fatalf("after a failed export: %+v", got)
		}
		mustNot(t, s.SetSnapshotExport(t.Context(), "snap_a", "snapshots/snap_a", at(50), ""), "record an export")
		list, err := s.ListSnapshots(t.Context(), "team_1")
		mustNot(t, err, "list snapshots")
		if len(list) != 1 || list[0].ObjectKey != "snapshots/snap_a" || !list[0].ExportedAt.Equal(at(50)) || list[0].ExportError != "" {
			t.Fatalf("after the export: %+v", list)
		}
		wantCode(t, s.SetSnapshotExport(t.Context(), "snap_gone", "k", at(50), ""), pandastack.ENotFound, "export of a missing snapshot")
		// An imported snapshot is created already exported.
		imp := snapshot("snap_i", "team_2", "imported")
		imp.ObjectKey, imp.ExportedAt = "snapshots/snap_x", at(51)
		mustNot(t, s.CreateSnapshot(t.Context(), imp), "create an imported snapshot")
		got, _ = s.GetSnapshot(t.Context(), "snap_i")
		if got.ObjectKey != imp.ObjectKey || !got.ExportedAt.Equal(at(51)) {
			t.Fatalf("imported snapshot round trip: %+v", got)
		}
	})
}
