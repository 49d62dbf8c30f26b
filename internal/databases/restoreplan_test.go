package databases

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// TestRestorePlanWindow: the restore window starts at the end of the first
// base backup, that moment included (the backup list shows it as the
// earliest restore time); a moment before it is refused; a later one
// starts from the newest backup that had ended by then.
func TestRestorePlanWindow(t *testing.T) {
	ctx := context.Background()
	s, store, _, _ := backupService(t)
	first := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	second := first.Add(time.Hour)
	for id, end := range map[string]time.Time{"dbb-1": first, "dbb-2": second} {
		if err := store.PutDatabaseBackup(ctx, pandastack.DatabaseBackup{ID: id, DatabaseID: "db-1", TeamID: "team_a",
			State: pandastack.BackupDone, StartedAt: end.Add(-time.Minute), FinishedAt: end}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PutDatabaseWAL(ctx, pandastack.DatabaseWAL{DatabaseID: "db-1", MarkedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	src := pandastack.Database{ID: "db-1", TeamID: "team_a"}
	for _, c := range []struct {
		name   string
		target time.Time
		want   string // the base backup; "" for a refusal
	}{
		{"before the first backup's end", first.Add(-time.Second), ""},
		{"at the first backup's end", first, "dbb-1"},
		{"between the backups", first.Add(time.Minute), "dbb-1"},
		{"at the second backup's end", second, "dbb-2"},
		{"after it", second.Add(time.Minute), "dbb-2"},
	} {
		b, err := s.restorePlan(ctx, src, c.target)
		var perr *pandastack.Error
		switch {
		case c.want == "" && (!errors.As(err, &perr) || perr.Code != pandastack.EInvalid):
			t.Errorf("%s: %+v %v, want an invalid-argument refusal", c.name, b, err)
		case c.want != "" && (err != nil || b.ID != c.want):
			t.Errorf("%s: base %q %v, want %q", c.name, b.ID, err, c.want)
		}
	}
}

// TestRestoreSize: a restore keeps the source's volume unless it asks for
// more; less than the source's, or outside the sizes a create takes, is
// refused as invalid.
func TestRestoreSize(t *testing.T) {
	for _, c := range []struct{ src, ask, want int }{
		{256, 0, 256},
		{256, 256, 256},
		{256, 2048, 2048},
		{1024, 512, 0},
		{256, 64, 0},
		{256, pandastack.MaxVolumeMiB + 1, 0},
	} {
		got, err := restoreSize(c.src, c.ask)
		if c.want == 0 {
			if pandastack.ErrorCode(err) != pandastack.EInvalid {
				t.Errorf("restore of a %d MiB source asking %d: %d, %v; want EInvalid", c.src, c.ask, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("restore of a %d MiB source asking %d: %d, %v; want %d", c.src, c.ask, got, err, c.want)
		}
	}
}

// backupService is a Service with backups on: a store and a file object
// store in directory dir, and nothing else.
func backupService(t *testing.T) (s *Service, store *sqlite.Store, objects *file.Store, dir string) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), t.TempDir()+"/pandastack.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	dir = t.TempDir()
	if objects, err = file.Open(dir); err != nil {
		t.Fatal(err)
	}
	return New(Config{Backup: BackupConfig{Objects: objects, Store: store}}), store, objects, dir
}
