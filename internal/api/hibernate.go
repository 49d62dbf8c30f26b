package api

import (
	"net/http"
)

// hibernate saves the sandbox whole and frees its memory and CPU.
func (s *Server) hibernate(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
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
