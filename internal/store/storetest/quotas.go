package storetest

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

func checkTeamQuotas(t *testing.T, got, want pandastack.TeamQuotas) {
	t.Helper()
	checkEqual(t, "quotas of "+want.TeamID, got, want, func(t *testing.T, g, w *pandastack.TeamQuotas) {
		t.Helper()
		checkTime(t, "team quotas UpdatedAt", g.UpdatedAt, w.UpdatedAt)
		g.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}
	})
}

func (h *harness) quotas(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		all := pandastack.TeamQuotas{TeamID: "team_1", UpdatedAt: at(10), Overrides: pandastack.QuotaOverrides{
			MaxSandboxes: ptr(5), MaxServiceMachines: ptr(1), MaxSnapshots: ptr(7), MaxVolumes: ptr(0),
			MaxConcurrentBuilds: ptr(2), MaxVCPUs: ptr(8), MaxMemoryMiB: ptr(4096),
			RequestsPerSecond: ptr(2.5), Burst: ptr(10), MaxDiskGiB: ptr(50),
		}}
		mustNot(t, s.PutTeamQuotas(t.Context(), all), "put quotas")
		got, err := s.GetTeamQuotas(t.Context(), "team_1")
		mustNot(t, err, "get quotas")
		checkTeamQuotas(t, got, all)

		// A put replaces the whole record: fields left nil go back to nil
		// (the server's default), and 0 stays 0 (no limit), not nil.
		some := pandastack.TeamQuotas{TeamID: "team_1", UpdatedAt: at(20), Overrides: pandastack.QuotaOverrides{
			MaxSandboxes: ptr(0), RequestsPerSecond: ptr(0.5),
		}}
		mustNot(t, s.PutTeamQuotas(t.Context(), some), "replace quotas")
		got, err = s.GetTeamQuotas(t.Context(), "team_1")
		mustNot(t, err, "get replaced quotas")
		checkTeamQuotas(t, got, some)
	})

	t.Run("NotFound", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		_, err := s.GetTeamQuotas(t.Context(), "team_1")
		wantCode(t, err, pandastack.ENotFound, "quotas of a team with no overrides")
		err = s.PutTeamQuotas(t.Context(), pandastack.TeamQuotas{TeamID: "team_missing", UpdatedAt: at(1)})
		wantCode(t, err, pandastack.ENotFound, "quotas of a missing team")
		_, err = s.GetTeamQuotas(t.Context(), "team_missing")
		wantCode(t, err, pandastack.ENotFound, "quotas of a rejected put")
		wantCode(t, s.PutTeamQuotas(t.Context(), pandastack.TeamQuotas{UpdatedAt: at(1)}), pandastack.EInvalid, "empty team id")
	})

	t.Run("PerTeam", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		mustNot(t, s.CreateTeam(t.Context(), team("team_2", "globex")), "create team")
		a := pandastack.TeamQuotas{TeamID: "team_1", UpdatedAt: at(1), Overrides: pandastack.QuotaOverrides{MaxVolumes: ptr(3)}}
		b := pandastack.TeamQuotas{TeamID: "team_2", UpdatedAt: at(2), Overrides: pandastack.QuotaOverrides{MaxVolumes: ptr(9)}}
		mustNot(t, s.PutTeamQuotas(t.Context(), a), "put a")
		mustNot(t, s.PutTeamQuotas(t.Context(), b), "put b")
		got, err := s.GetTeamQuotas(t.Context(), "team_1")
		mustNot(t, err, "get a")
		checkTeamQuotas(t, got, a)
		got, err = s.GetTeamQuotas(t.Context(), "team_2")
		mustNot(t, err, "get b")
		checkTeamQuotas(t, got, b)
	})
}
