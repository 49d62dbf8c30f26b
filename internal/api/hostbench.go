package api

import (
	"context"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostbench"
)

// HostBench measures on the host what the bench cannot see through the
// API (package hostbench): restore floors and each VM process's cost.
type HostBench interface {
	Floor(ctx context.Context, r hostbench.FloorRequest) (hostbench.Floor, error)
	Usage(ctx context.Context) (hostbench.Usage, error)
}

func (s *Server) hostBench() (HostBench, error) {
	if s.cfg.Bench == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "this server does not measure on its host")
	}
	return s.cfg.Bench, nil
}

// benchFloor restores a template bare (no network, no guest agent) on the
// host, one at a time then several at once: the floors `pandastack bench`
// reports its figures against.
func (s *Server) benchFloor(w http.ResponseWriter, r *http.Request) error {
	b, err := s.hostBench()
	if err != nil {
		return err
	}
	var req hostbench.FloorRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	req.TeamID = caller(r).team.ID // a function floor: the caller's function
	f, err := b.Floor(r.Context(), req)
	if err != nil {
		return wrap(err, "measure floor")
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

// benchUsage reports the host's memory and CPU and each VM process's PSS
// and CPU time.
func (s *Server) benchUsage(w http.ResponseWriter, r *http.Request) error {
	b, err := s.hostBench()
	if err != nil {
		return err
	}
	u, err := b.Usage(r.Context())
	if err != nil {
		return wrap(err, "measure host usage")
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}
