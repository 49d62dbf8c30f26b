package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
)

// machineList is a team's service machines and its cap.
type machineList struct {
	Machines []pandastack.Sandbox `json:"machines"`
	// Count is how many of them are live; Limit the team's cap on live
	// service machines (0: none).
	Count int `json:"count"`
	Limit int `json:"limit"`
}

// listMachines lists the caller's service machines (sandboxes created with
// lifetime "service"), live ones by default, every one with state=all: a
// service machine whose VM did not survive a restart stays listed as
// failed, with the reason.
func (s *Server) listMachines(w http.ResponseWriter, r *http.Request) error {
	team := caller(r).team.ID
	f := pandastack.SandboxFilter{TeamID: team, Lifetime: pandastack.LifetimeService, LiveOnly: true}
	switch st := r.URL.Query().Get("state"); st {
	case "", "live":
	case "all":
		f.LiveOnly = false
	default:
		return invalid("state must be live or all, got %q", st)
	}
	ms, live, err := s.sbx.Machines(r.Context(), team, !f.LiveOnly)
	if err != nil {
		return err
	}
	limit, err := s.sbx.ServiceLimit(r.Context(), team)
	if err != nil {
		return err
	}
	mounts, err := s.volumeMounts(r, team)
	if err != nil {
		return err
	}
	out := machineList{Machines: make([]pandastack.Sandbox, 0, len(ms)), Count: live, Limit: limit}
	for _, m := range ms {
		out.Machines = append(out.Machines, s.presentWith(r, m, mounts))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
