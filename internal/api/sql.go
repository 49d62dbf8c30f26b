package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
)

// sqlOverHTTP serves POST /sql (and its CORS preflight), Neon's
// SQL-over-HTTP wire (internal/sqlhttp). It needs no API key: the
// Neon-Connection-String header carries the database's own credentials.
func (s *Server) sqlOverHTTP(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.SQL == nil {
		return pandastack.Errorf(pandastack.EUnavailable, "this server runs no databases")
	}
	s.cfg.SQL.ServeHTTP(w, r)
	return nil
}
