package sqlite

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

func TestDatabaseBackupRecords(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	at := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	b := pandastack.DatabaseBackup{ID: "dbb-2", DatabaseID: "db-1", TeamID: "team_a", State: pandastack.BackupRunning, StartedAt: at.Add(time.Hour)}
	if err := s.PutDatabaseBackup(ctx, b); err != nil {
		t.Fatal(err)
	}
	older := pandastack.DatabaseBackup{ID: "dbb-1", DatabaseID: "db-1", TeamID: "team_a", State: pandastack.BackupDone, StartedAt: at,
		FinishedAt: at.Add(time.Minute), StartLSN: "0/2000028", EndLSN: "0/2000100", StartWAL: "000000010000000000000002", SizeBytes: 42, Verified: true}
	if err := s.PutDatabaseBackup(ctx, older); err != nil {
		t.Fatal(err)
	}
	if err := s.PutDatabaseBackup(ctx, pandastack.DatabaseBackup{ID: "dbb-3", DatabaseID: "db-9", TeamID: "team_b", State: pandastack.BackupDone, StartedAt: at}); err != nil {
		t.Fatal(err)
	}
	b.State, b.FinishedAt, b.Error = pandastack.BackupFailed, at.Add(2*time.Hour), "boom"
	if err := s.PutDatabaseBackup(ctx, b); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListDatabaseBackups(ctx, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != older || got[1] != b {
		t.Fatalf("listed %+v, want oldest first %+v %+v", got, older, b)
	}
	if all, _ := s.ListDatabaseBackups(ctx, ""); len(all) != 3 {
		t.Fatalf("every database's: %d", len(all))
	}
	if err := s.DeleteDatabaseBackup(ctx, "dbb-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ListDatabaseBackups(ctx, "db-1"); len(got) != 1 || got[0].ID != "dbb-2" {
		t.Fatalf("after delete: %+v", got)
	}

	w, err := s.GetDatabaseWAL(ctx, "db-1")
	if err != nil || w != (pandastack.DatabaseWAL{DatabaseID: "db-1"}) {
		t.Fatalf("no archive yet: %+v %v", w, err)
	}
	w = pandastack.DatabaseWAL{DatabaseID: "db-1", LastSegment: "000000010000000000000003", ArchivedAt: at, MarkedAt: at.Add(-time.Second)}
	if err := s.PutDatabaseWAL(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetDatabaseWAL(ctx, "db-1"); err != nil || got != w {
		t.Fatalf("got %+v %v, want %+v", got, err, w)
	}
	if err := s.DeleteDatabaseWAL(ctx, "db-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetDatabaseWAL(ctx, "db-1"); got.LastSegment != "" {
		t.Fatalf("after delete: %+v", got)
	}
}
