package api

import (
	"context"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/databases"
)

// Databases is the managed PostgreSQL service (*databases.Service); every
// call is scoped to the caller's team.
type Databases interface {
	Create(ctx context.Context, teamID string, p databases.CreateParams) (databases.Info, error)
	Get(ctx context.Context, teamID, ref string) (databases.Info, error)
	List(ctx context.Context, teamID string) ([]databases.Info, error)
	Delete(ctx context.Context, teamID, ref string) error
	Hibernate(ctx context.Context, teamID, ref string) (databases.Info, error)
	Wake(ctx context.Context, teamID, ref string) (databases.Info, error)
	Fork(ctx context.Context, teamID, ref, name string) (databases.Info, error)
}

type createDatabaseRequest struct {
	Name                 string `json:"name"`
	AutoHibernateSeconds *int64 `json:"auto_hibernate_seconds"`
	SizeMiB              int    `json:"size_mib"`
}

type databaseList struct {
	Databases []databases.Info `json:"databases"`
}

func (s *Server) databases() (Databases, error) {
	if s.cfg.Databases == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "this server runs no databases")
	}
	return s.cfg.Databases, nil
}

// createDatabase makes a database; 201 only once a query through the
// database router answered.
func (s *Server) createDatabase(w http.ResponseWriter, r *http.Request) error {
	dbs, err := s.databases()
	if err != nil {
		return err
	}
	var req createDatabaseRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return invalid("name is required")
	}
	p := caller(r)
	d, err := dbs.Create(r.Context(), p.team.ID, databases.CreateParams{Name: req.Name, AutoHibernateSeconds: req.AutoHibernateSeconds, SizeMiB: req.SizeMiB})
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "database created", "request_id", requestID(r), "database", d.ID, "team", p.team.Name, "machine", d.MachineID)
	writeJSON(w, http.StatusCreated, d)
	return nil
}

func (s *Server) listDatabases(w http.ResponseWriter, r *http.Request) error {
	dbs, err := s.databases()
	if err != nil {
		return err
	}
	list, err := dbs.List(r.Context(), caller(r).team.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, databaseList{Databases: list})
	return nil
}

// databaseCall runs fn on the {id} database of the caller's team and
// writes what it returns.
func (s *Server) databaseCall(w http.ResponseWriter, r *http.Request,
	fn func(Databases, context.Context, string, string) (databases.Info, error)) error {
	dbs, err := s.databases()
	if err != nil {
		return err
	}
	d, err := fn(dbs, r.Context(), caller(r).team.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) getDatabase(w http.ResponseWriter, r *http.Request) error {
	return s.databaseCall(w, r, Databases.Get)
}

func (s *Server) hibernateDatabase(w http.ResponseWriter, r *http.Request) error {
	return s.databaseCall(w, r, Databases.Hibernate)
}

func (s *Server) wakeDatabase(w http.ResponseWriter, r *http.Request) error {
	return s.databaseCall(w, r, Databases.Wake)
}

// deleteDatabase removes a database: its machine (and data) and route.
func (s *Server) deleteDatabase(w http.ResponseWriter, r *http.Request) error {
	dbs, err := s.databases()
	if err != nil {
		return err
	}
	if err := dbs.Delete(r.Context(), caller(r).team.ID, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
