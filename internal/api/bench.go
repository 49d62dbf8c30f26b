package api

import (
	"context"
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
)

// ColdBooter is implemented by builders that can boot a template without its
// snapshot: the baseline `pandastack bench` compares creates with.
type ColdBooter interface {
	ColdBoot(ctx context.Context, name string) (time.Duration, error)
}

type pingResponse struct {
	RTTMs float64 `json:"rtt_ms"`
}

// ping measures one round trip to the sandbox's guest agent.
func (s *Server) ping(w http.ResponseWriter, r *http.Request) error {
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	d, err := g.Ping(r.Context())
	if err != nil {
		return wrap(err, "ping guest agent")
	}
	writeJSON(w, http.StatusOK, pingResponse{RTTMs: float64(d.Microseconds()) / 1000})
	return nil
}

type coldBootResponse struct {
	Template   string           `json:"template"`
	ColdBootMs float64          `json:"cold_boot_ms"`
	Accel      pandastack.Accel `json:"accel"`
}

// coldBoot boots a template from its disk image, without the snapshot.
func (s *Server) coldBoot(w http.ResponseWriter, r *http.Request) error {
	cb, ok := s.cfg.Builder.(ColdBooter)
	if !ok {
		return pandastack.Errorf(pandastack.EUnavailable, "this server cannot cold-boot templates")
	}
	name := r.PathValue("name")
	d, err := cb.ColdBoot(r.Context(), name)
	if err != nil {
		return wrap(err, "cold boot "+name)
	}
	writeJSON(w, http.StatusOK, coldBootResponse{Template: name, ColdBootMs: float64(d.Microseconds()) / 1000, Accel: s.cfg.Engine.Accel()})
	return nil
}
