package api

import (
	"net/http"
)

type forkDatabaseRequest struct {
	Name string `json:"name"`
}

// forkDatabase copies a running database into a new one of the caller's
// team; 201 like create, once a query through the router answered.
func (s *Server) forkDatabase(w http.ResponseWriter, r *http.Request) error {
	dbs, err := s.databases()
	if err != nil {
		return err
	}
	var req forkDatabaseRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return invalid("name is required")
	}
	p := caller(r)
	d, err := dbs.Fork(r.Context(), p.team.ID, r.PathValue("id"), req.Name)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "database forked", "request_id", requestID(r), "database", d.ID, "parent", r.PathValue("id"),
		"team", p.team.Name, "machine", d.MachineID)
	writeJSON(w, http.StatusCreated, d)
	return nil
}
