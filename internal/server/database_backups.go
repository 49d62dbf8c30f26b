package server

import (
	"context"
	"fmt"

	"github.com/pandastack/pandastack/internal/databases"
	"github.com/pandastack/pandastack/internal/objstore/objurl"
)

// databaseBackupConfig is where databases' WAL archive and base backups
// go: the server's object store (--object-store, default DATA/objects),
// opened again for the databases, under databases/<id>/.
func (s *Server) databaseBackupConfig() (databases.BackupConfig, error) {
	u := ObjectStoreURL(s.cfg.DataDir, s.cfg.ObjectStore)
	objects, err := objurl.Open(u)
	if err != nil {
		return databases.BackupConfig{}, fmt.Errorf("open object store for database backups: %w", err)
	}
	return databases.BackupConfig{Objects: objects, Store: s.store, Schedule: s.cfg.DBBackupSchedule,
		Retention: s.cfg.DBBackupRetention, Verify: !s.cfg.DBBackupNoVerify}, nil
}

// runDatabaseBackups archives WAL and takes scheduled base backups until
// ctx ends.
func (s *Server) runDatabaseBackups(ctx context.Context) {
	if s.databases == nil {
		return
	}
	if err := s.databases.RunBackups(ctx); err != nil {
		s.log.Error("database backups stopped", "err", err)
	}
}

// DefaultDBBackupRetention is --db-backup-retention's default.
const DefaultDBBackupRetention = databases.DefaultRetention
