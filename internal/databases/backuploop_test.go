package databases

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

func TestDueForBackup(t *testing.T) {
	spec, err := cron.Parse("@daily", "")
	if err != nil {
		t.Fatal(err)
	}
	day := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.UTC) }
	db := pandastack.Database{ID: "db-1", CreatedAt: day(23, 10)}
	done := func(at time.Time) pandastack.DatabaseBackup {
		return pandastack.DatabaseBackup{State: pandastack.BackupDone, StartedAt: at}
	}
	failed := func(at time.Time) pandastack.DatabaseBackup {
		return pandastack.DatabaseBackup{State: pandastack.BackupFailed, StartedAt: at}
	}
	for _, c := range []struct {
		name string
		list []pandastack.DatabaseBackup
		now  time.Time
		want bool
	}{
		{"created today, no backup, before midnight", nil, day(23, 20), false},
		{"no backup, past midnight", nil, day(24, 1), true},
		{"backed up after midnight", []pandastack.DatabaseBackup{done(day(24, 0).Add(time.Minute))}, day(24, 5), false},
		{"backed up yesterday", []pandastack.DatabaseBackup{done(day(23, 12))}, day(24, 5), true},
		{"failed half an hour ago", []pandastack.DatabaseBackup{done(day(23, 12)), failed(day(24, 4).Add(30 * time.Minute))}, day(24, 5), false},
		{"failed two hours ago", []pandastack.DatabaseBackup{done(day(23, 12)), failed(day(24, 3))}, day(24, 5), true},
	} {
		if got := dueForBackup(spec, db, c.list, c.now); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSweep: retention removes base backups that ended before the window
// and the WAL only they needed; a live database keeps its newest backup
// however old; a deleted database's backups and WAL go once expired.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, t.TempDir()+"/pandastack.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	objects, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Backup: BackupConfig{Objects: objects, Store: store, Retention: 7 * 24 * time.Hour}})
	// The objects are written now; sweep as if a month had passed.
	now := time.Now().Add(30 * 24 * time.Hour)
	put := func(key string) {
		if err := objects.Put(ctx, key, strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}
	}
	seg := func(n int) string { return walFileName(1, uint64(n)*walSegmentSize) }
	backup := func(db, id string, endedDaysAgo int, startSeg int) {
		b := pandastack.DatabaseBackup{ID: id, DatabaseID: db, TeamID: "team_a", State: pandastack.BackupDone,
			StartedAt: now.Add(-time.Duration(endedDaysAgo)*24*time.Hour - time.Minute), FinishedAt: now.Add(-time.Duration(endedDaysAgo) * 24 * time.Hour),
			StartWAL: seg(startSeg)}
		if err := store.PutDatabaseBackup(ctx, b); err != nil {
			t.Fatal(err)
		}
		put(baseKey(db, id))
	}
	backup("db-live", "dbb-old1", 20, 2)
	backup("db-live", "dbb-old2", 10, 5)
	backup("db-live", "dbb-new", 1, 8)
	backup("db-lone", "dbb-lone", 12, 3) // a live database's only backup, expired
	backup("db-gone", "dbb-gone", 10, 1)
	backup("db-gone-recent", "dbb-recent", 2, 1)
	for n := 1; n <= 9; n++ {
		put(walKey("db-live", seg(n)))
	}
	put(walKey("db-gone", seg(1)))
	put(walKey("db-gone", seg(2)))
	put(walKey("db-nobackup", seg(4))) // deleted before any base backup
	if err := store.PutDatabaseWAL(ctx, pandastack.DatabaseWAL{DatabaseID: "db-gone", LastSegment: seg(2)}); err != nil {
		t.Fatal(err)
	}

	s.sweep(ctx, []pandastack.Database{{ID: "db-live"}, {ID: "db-lone"}}, now)

	ids := func(db string) string {
		list, err := store.ListDatabaseBackups(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range list {
			out = append(out, b.ID)
		}
		return strings.Join(out, ",")
	}
	for db, want := range map[string]string{"db-live": "dbb-new", "db-lone": "dbb-lone", "db-gone": "", "db-gone-recent": "dbb-recent"} {
		if got := ids(db); got != want {
			t.Errorf("%s keeps backups %q, want %q", db, got, want)
		}
	}
	keys, err := objects.List(ctx, "databases/")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, k := range keys {
		got = append(got, k.Key)
	}
	want := []string{baseKey("db-gone-recent", "dbb-recent"), baseKey("db-live", "dbb-new")}
	for n := 8; n <= 9; n++ {
		want = append(want, walKey("db-live", seg(n)))
	}
	want = append(want, baseKey("db-lone", "dbb-lone"))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("objects left:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w, _ := store.GetDatabaseWAL(ctx, "db-gone"); w.LastSegment != "" {
		t.Errorf("a deleted database's emptied archive is still recorded: %+v", w)
	}
}
