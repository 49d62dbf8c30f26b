package api

import (
	"net/http"
)

// listPreviews answers an app's pull request previews.
func (s *Server) listPreviews(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	ps, err := svc.Previews(r.Context(), caller(r).team.ID, r.PathValue("name"))
	if err != nil {
		return wrap(err, "list previews")
	}
	writeJSON(w, http.StatusOK, map[string]any{"previews": ps})
	return nil
}
