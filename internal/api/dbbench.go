package api

import (
	"context"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/databases"
)

// DatabaseBench runs pgbench inside a database's machine, the yardstick
// `pandastack bench --databases` sets pgbench through the router against
// (*databases.Service). Admin keys only: a tenant cannot run commands in
// a database's machine.
type DatabaseBench interface {
	PgbenchInside(ctx context.Context, id string, p databases.PgbenchParams) (databases.PgbenchResult, error)
}

type databasePgbenchRequest struct {
	Clients    int  `json:"clients"`
	Seconds    int  `json:"seconds"`
	SelectOnly bool `json:"select_only"`
}

// benchDatabasePgbench runs pgbench in database {id}'s machine on its
// local socket and answers what pgbench reported.
func (s *Server) benchDatabasePgbench(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.DatabaseBench == nil {
		return pandastack.Errorf(pandastack.EUnavailable, "this server runs no databases")
	}
	req := databasePgbenchRequest{Clients: 4, Seconds: 5}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	res, err := s.cfg.DatabaseBench.PgbenchInside(r.Context(), r.PathValue("id"),
		databases.PgbenchParams{Clients: req.Clients, Seconds: req.Seconds, SelectOnly: req.SelectOnly})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
