package api

import (
	"context"
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/databases"
)

// DatabaseBackups is the databases' backups and point-in-time restore
// (*databases.Service); every call is scoped to the caller's team.
type DatabaseBackups interface {
	Backups(ctx context.Context, teamID, ref string) (databases.BackupList, error)
	Backup(ctx context.Context, teamID, ref string) (databases.BackupInfo, error)
	Restore(ctx context.Context, teamID, ref string, p databases.RestoreParams) (databases.Info, error)
}

func (s *Server) databaseBackups() (DatabaseBackups, error) {
	if s.cfg.DatabaseBackups == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "this server keeps no database backups")
	}
	return s.cfg.DatabaseBackups, nil
}

// listDatabaseBackups lists a database's base backups, its WAL archive's
// position and the earliest time it restores to.
func (s *Server) listDatabaseBackups(w http.ResponseWriter, r *http.Request) error {
	b, err := s.databaseBackups()
	if err != nil {
		return err
	}
	list, err := b.Backups(r.Context(), caller(r).team.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// backupDatabase takes a base backup now; 201 once it is stored.
func (s *Server) backupDatabase(w http.ResponseWriter, r *http.Request) error {
	b, err := s.databaseBackups()
	if err != nil {
		return err
	}
	p := caller(r)
	bk, err := b.Backup(r.Context(), p.team.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "database backed up", "request_id", requestID(r), "database", bk.DatabaseID, "backup", bk.ID, "team", p.team.Name)
	writeJSON(w, http.StatusCreated, bk)
	return nil
}

type restoreDatabaseRequest struct {
	Name       string `json:"name"`
	TargetTime string `json:"target_time"`
	SizeMiB    int    `json:"size_mib"`
}

// restoreDatabase makes a new database from another's backups as it was
// at target_time; 201 like create.
func (s *Server) restoreDatabase(w http.ResponseWriter, r *http.Request) error {
	b, err := s.databaseBackups()
	if err != nil {
		return err
	}
	var req restoreDatabaseRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return invalid("name is required")
	}
	if req.TargetTime == "" {
		return invalid("target_time is required (RFC 3339, e.g. 2026-11-24T10:30:00Z)")
	}
	at, err := time.Parse(time.RFC3339Nano, req.TargetTime)
	if err != nil {
		return invalid("target_time %q is not an RFC 3339 time (e.g. 2026-11-24T10:30:00Z)", req.TargetTime)
	}
	p := caller(r)
	d, err := b.Restore(r.Context(), p.team.ID, r.PathValue("id"), databases.RestoreParams{Name: req.Name, TargetTime: at, SizeMiB: req.SizeMiB})
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "database restored", "request_id", requestID(r), "database", d.ID, "source", r.PathValue("id"),
		"team", p.team.Name, "target_time", at)
	writeJSON(w, http.StatusCreated, d)
	return nil
}
