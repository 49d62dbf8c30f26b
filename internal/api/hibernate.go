package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// hibernate saves the sandbox whole and frees its memory and CPU.
func (s *Server) hibernate(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	if sb.State == pandastack.StateRunning {
		// Its memory stays on disk while it sleeps.
		release, err := s.quotas.Reserve(r.Context(), sb.TeamID, quotas.Usage{DiskMiB: sb.MemoryMiB})
		if err != nil {
			return err
		}
		defer release()
	}
	out, err := s.cfg.Engine.Hibernate(r.Context(), sb.ID)
	if err != nil {
		return wrap(err, "hibernate sandbox")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// wake brings a hibernated sandbox back (any other use does too).
func (s *Server) wake(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	out, err := s.cfg.Engine.Wake(r.Context(), sb.ID)
	if err != nil {
		return wrap(err, "wake sandbox")
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type forkRequest struct {
	Count *int `json:"count"`
}

type forkList struct {
	Sandboxes []pandastack.Sandbox `json:"sandboxes"`
}

// fork makes copy-on-write children of a running sandbox. Without count the
// answer is the one child; with count, {"sandboxes": [...]}.
func (s *Server) fork(w http.ResponseWriter, r *http.Request) error {
	var req forkRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	n := 1
	if req.Count != nil {
		n = *req.Count
		if n < 1 || n > 10 {
			return invalid("count must be between 1 and 10, not %d", n)
		}
	}
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	kids, err := s.sbx.Fork(r.Context(), sb, n)
	if err != nil {
		return err
	}
	if req.Count == nil {
		writeJSON(w, http.StatusCreated, kids[0])
		return nil
	}
	writeJSON(w, http.StatusCreated, forkList{Sandboxes: kids})
	return nil
}
