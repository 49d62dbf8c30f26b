package storetest

import (
	"sync"
	"testing"

	"github.com/pandastack/pandastack"
)

func volume(id, team, name string) pandastack.Volume {
	return pandastack.Volume{ID: id, TeamID: team, Name: name, SizeMiB: 64, Host: "local", CreatedAt: at(50)}
}

func (h *harness) volumes(t *testing.T) {
	t.Run("RoundTripListDelete", func(t *testing.T) {
		s := h.newStore(t)
		a := volume("vol_a", "team_1", "one")
		a.ManagedBy = "database:db-one" // a platform service's volume keeps its owner
		b := volume("vol_b", "team_1", "two")
		b.CreatedAt = at(51)
		c := volume("vol_c", "team_2", "one") // names are per team
		for _, v := range []pandastack.Volume{a, b, c} {
			mustNot(t, s.CreateVolume(t.Context(), v), "create volume "+v.ID)
		}
		got, err := s.GetVolume(t.Context(), "vol_a")
		mustNot(t, err, "get volume")
		if !got.CreatedAt.Equal(a.CreatedAt) {
			t.Errorf("created_at %v, want %v", got.CreatedAt, a.CreatedAt)
		}
		got.CreatedAt = a.CreatedAt
		if got != a {
			t.Errorf("round trip: got %+v, want %+v", got, a)
		}
		byName, err := s.VolumeByName(t.Context(), "team_2", "one")
		mustNot(t, err, "volume by name")
		if byName.ID != "vol_c" {
			t.Errorf("team_2's volume \"one\" is %s, want vol_c", byName.ID)
		}
		_, err = s.VolumeByName(t.Context(), "team_3", "one")
		wantCode(t, err, pandastack.ENotFound, "another team's name")
		list, err := s.ListVolumes(t.Context(), "team_1")
		mustNot(t, err, "list volumes")
		if len(list) != 2 || list[0].ID != "vol_a" || list[1].ID != "vol_b" {
			t.Errorf("team_1 lists %+v", list)
		}
		all, err := s.ListVolumes(t.Context(), "")
		mustNot(t, err, "list every volume")
		if len(all) != 3 {
			t.Errorf("every team lists %d volumes, want 3", len(all))
		}
		empty, err := s.ListVolumes(t.Context(), "team_none")
		mustNot(t, err, "list volumes of an unknown team")
		if empty == nil || len(empty) != 0 {
			t.Errorf("unknown team lists %#v, want an empty non-nil slice", empty)
		}
		mustNot(t, s.DeleteVolume(t.Context(), "vol_a"), "delete volume")
		_, err = s.GetVolume(t.Context(), "vol_a")
		wantCode(t, err, pandastack.ENotFound, "GetVolume after delete")
		wantCode(t, s.DeleteVolume(t.Context(), "vol_a"), pandastack.ENotFound, "second delete")
	})

	t.Run("NameTakenInTeam", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateVolume(t.Context(), volume("vol_a", "team_1", "one")), "create volume")
		wantCode(t, s.CreateVolume(t.Context(), volume("vol_b", "team_1", "one")), pandastack.EConflict, "same name in the same team")
		if _, err := s.GetVolume(t.Context(), "vol_b"); pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Errorf("the refused volume was stored: %v", err)
		}
	})

	t.Run("AttachDetach", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateVolume(t.Context(), volume("vol_a", "team_1", "one")), "create volume")
		mustNot(t, s.AttachVolume(t.Context(), "vol_a", "sbx_1", "/data", 1), "attach")
		got, err := s.GetVolume(t.Context(), "vol_a")
		mustNot(t, err, "get volume")
		if got.SandboxID != "sbx_1" || got.MountPath != "/data" || got.Slot != 1 {
			t.Errorf("attached volume reads %+v", got)
		}
		wantCode(t, s.AttachVolume(t.Context(), "vol_a", "sbx_2", "/x", 0), pandastack.EConflict, "attach an attached volume")
		wantCode(t, s.DeleteVolume(t.Context(), "vol_a"), pandastack.EConflict, "delete an attached volume")
		wantCode(t, s.AttachVolume(t.Context(), "vol_none", "sbx_2", "/x", 0), pandastack.ENotFound, "attach an unknown volume")
		mustNot(t, s.MoveVolumes(t.Context(), "sbx_1", "sbx_9"), "move")
		if got, _ := s.GetVolume(t.Context(), "vol_a"); got.SandboxID != "sbx_9" || got.MountPath != "/data" {
			t.Errorf("moved volume reads %+v", got)
		}
		mustNot(t, s.DetachVolumes(t.Context(), "sbx_1"), "detach a sandbox with no volumes")
		if got, _ := s.GetVolume(t.Context(), "vol_a"); got.SandboxID != "sbx_9" {
			t.Errorf("detaching another sandbox freed it: %+v", got)
		}
		mustNot(t, s.DetachVolumes(t.Context(), "sbx_9"), "detach")
		if got, _ := s.GetVolume(t.Context(), "vol_a"); got.SandboxID != "" || got.MountPath != "" {
			t.Errorf("detached volume reads %+v", got)
		}
		mustNot(t, s.DeleteVolume(t.Context(), "vol_a"), "delete the detached volume")
	})

	t.Run("AttachIsAtomic", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateVolume(t.Context(), volume("vol_a", "team_1", "one")), "create volume")
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.AttachVolume(t.Context(), "vol_a", "sbx_"+string(rune('a'+i)), "/data", 0)
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case pandastack.ErrorCode(err) != pandastack.EConflict:
				t.Errorf("a losing attach: %v, want conflict", err)
			}
		}
		if won != 1 {
			t.Errorf("%d of %d racing attaches won, want exactly 1", won, n)
		}
	})

	t.Run("SurvivesReopen", func(t *testing.T) {
		path := newPath(t)
		s := h.open(t, path)
		mustNot(t, s.CreateVolume(t.Context(), volume("vol_a", "team_1", "one")), "create volume")
		mustNot(t, s.AttachVolume(t.Context(), "vol_a", "sbx_1", "/data", 0), "attach")
		mustNot(t, s.Close(), "close")
		s2 := h.openAt(t, path)
		got, err := s2.GetVolume(t.Context(), "vol_a")
		mustNot(t, err, "get volume after reopen")
		if got.SandboxID != "sbx_1" {
			t.Errorf("after reopen the volume reads %+v", got)
		}
	})
}
