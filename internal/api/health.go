package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
)

type healthResponse struct {
	Status    string           `json:"status"`
	Version   string           `json:"version"`
	Accel     pandastack.Accel `json:"accel"`
	Isolation string           `json:"isolation"`
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	a := s.cfg.Engine.Accel()
	writeJSON(w, http.StatusOK, healthResponse{
		Status:    "ok",
		Version:   pandastack.Version,
		Accel:     a,
		Isolation: a.Isolation(),
	})
	return nil
}
