package api

import (
	"context"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/databases"
)

// DatabaseBench runs pgbench inside a database's machine, or on the host
// over its NIC: the yardstick and the floor `pandastack bench --databases`
// sets pgbench through the router against (*databases.Service). Admin keys only: a tenant cannot run commands in
// a database's machine.
type DatabaseBench interface {
	Pgbench(ctx context.Context, id string, p databases.PgbenchParams) (databases.PgbenchResult, error)
	// MeasureForkFloor forks the database's machine, runs the child's
	// first query with the parent's password and removes the child: what
	// a fork stands on, without the route, the child's own password and
	// the pooler's check (databases.ForkFloor).
	MeasureForkFloor(ctx context.Context, id string) (databases.ForkFloor, error)
}

type databasePgbenchRequest struct {
	Clients    int    `json:"clients"`
	Seconds    int    `json:"seconds"`
	SelectOnly bool   `json:"select_only"`
	Via        string `json:"via"`
}

// benchDatabasePgbench runs pgbench against database {id} (in its
// machine on its local socket, or over its NIC) and answers what pgbench
// reported.
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
	res, err := s.cfg.DatabaseBench.Pgbench(r.Context(), r.PathValue("id"),
		databases.PgbenchParams{Clients: req.Clients, Seconds: req.Seconds, SelectOnly: req.SelectOnly, Via: req.Via})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// benchDatabaseForkFloor measures database {id}'s fork floor once.
func (s *Server) benchDatabaseForkFloor(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.DatabaseBench == nil {
		return pandastack.Errorf(pandastack.EUnavailable, "this server runs no databases")
	}
	f, err := s.cfg.DatabaseBench.MeasureForkFloor(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}
