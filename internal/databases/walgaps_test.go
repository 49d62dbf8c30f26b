package databases

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore"
)

// TestWALGaps: a missing run of segments after a finished base backup's
// start is a gap, closed by the first base backup that starts after it;
// one before any backup (outside the restore window), consecutive
// segments across a log id's end, a history file and another timeline's
// segments are not.
func TestWALGaps(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC)
	var objs []objstore.Info
	for i, name := range []string{
		// F0, then a gap before the first backup: outside the window
		"0000000100000000000000F0",
		"0000000100000000000000FE", "0000000100000000000000FF", "000000010000000100000000", // a log id's end
		"000000010000000100000001",
		// 02..05 lost
		"000000010000000100000006", "000000010000000100000007",
		"00000002.history", "000000020000000100000009", // another timeline
	} {
		objs = append(objs, objstore.Info{Key: walKey("db-1", name), ModTime: t0.Add(time.Duration(i-1) * time.Minute)})
	}
	backups := []pandastack.DatabaseBackup{
		{ID: "dbb-1", State: pandastack.BackupDone, StartWAL: "0000000100000000000000FE", FinishedAt: t0},
		{ID: "dbb-bad", State: pandastack.BackupFailed, StartWAL: "000000010000000100000006", FinishedAt: t0.Add(4 * time.Minute)},
		{ID: "dbb-2", State: pandastack.BackupDone, StartWAL: "000000010000000100000006", FinishedAt: t0.Add(5 * time.Minute)},
	}
	got := walGaps("db-1", objs, backups)
	want := []walGap{{After: "000000010000000100000001", Resume: "000000010000000100000006", From: t0.Add(3 * time.Minute),
		Until: t0.Add(5 * time.Minute), Backup: "dbb-2"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("gaps:\n got %+v\nwant %+v", got, want)
	}
	if g, ok := gapAfter(got, backups[0]); !ok || g.After != want[0].After {
		t.Errorf("gap after dbb-1: %+v %v, want the one after segment 1/01", g, ok)
	}
	if g, ok := gapAfter(got, backups[2]); ok {
		t.Errorf("gap after dbb-2, which starts past it: %+v", g)
	}
	// With no backup after it, the gap stays open.
	if got := walGaps("db-1", objs, backups[:1]); len(got) != 1 || !got[0].Until.IsZero() {
		t.Errorf("gaps with no backup after: %+v, want one without an end", got)
	}
}

// TestRestorePlanRefusesAGap: a moment after the last segment archived
// before a gap, and before the base backup that follows it, is refused up
// front with both bounds (before, recovery ran out of WAL in a new VM);
// moments on either side restore from the backup before or after it.
func TestRestorePlanRefusesAGap(t *testing.T) {
	ctx := context.Background()
	s, store, objects, dir := backupService(t)
	t0 := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Second)
	// Segments 1-2 archived a minute apart, 3-5 lost, 6 after the gap.
	for i, name := range []string{"000000010000000000000001", "000000010000000000000002", "000000010000000000000006"} {
		key := walKey("db-1", name)
		if err := objects.Put(ctx, key, strings.NewReader("wal")); err != nil {
			t.Fatal(err)
		}
		mod := t0.Add(time.Duration(i+1) * time.Minute)
		if name == "000000010000000000000006" {
			mod = t0.Add(30 * time.Minute)
		}
		if err := os.Chtimes(filepath.Join(dir, "data", key), mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	first, second := t0, t0.Add(20*time.Minute) // the second backup starts after the gap
	for _, b := range []pandastack.DatabaseBackup{
		{ID: "dbb-1", StartWAL: "000000010000000000000001", FinishedAt: first},
		{ID: "dbb-2", StartWAL: "000000010000000000000006", FinishedAt: second},
	} {
		b.DatabaseID, b.TeamID, b.State, b.StartedAt = "db-1", "team_a", pandastack.BackupDone, b.FinishedAt.Add(-time.Minute)
		if err := store.PutDatabaseBackup(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.PutDatabaseWAL(ctx, pandastack.DatabaseWAL{DatabaseID: "db-1", MarkedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	src := pandastack.Database{ID: "db-1", TeamID: "team_a"}
	gapStart := t0.Add(2 * time.Minute) // segment 2's upload
	for _, c := range []struct {
		name   string
		target time.Time
		want   string // the base backup; "" for a refusal
	}{
		{"before the gap", gapStart.Add(-time.Second), "dbb-1"},
		{"at the gap's start", gapStart, "dbb-1"},
		{"in the gap", gapStart.Add(time.Second), ""},
		{"in the gap, just before the next backup's end", second.Add(-time.Second), ""},
		{"at the next backup's end", second, "dbb-2"},
		{"after it", second.Add(time.Minute), "dbb-2"},
	} {
		b, err := s.restorePlan(ctx, src, c.target)
		if c.want != "" {
			if err != nil || b.ID != c.want {
				t.Errorf("%s: base %q %v, want %q", c.name, b.ID, err, c.want)
			}
			continue
		}
		if pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("%s: %+v %v, want an invalid-argument refusal", c.name, b, err)
			continue
		}
		for _, bound := range []time.Time{gapStart, second} {
			if !strings.Contains(err.Error(), bound.Format(time.RFC3339Nano)) {
				t.Errorf("%s: %v, want the gap's bound %s named", c.name, err, bound.Format(time.RFC3339Nano))
			}
		}
	}
	list, err := s.backupList(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.RestoreGaps) != 1 || !list.RestoreGaps[0].From.Equal(gapStart) || list.RestoreGaps[0].Until == nil || !list.RestoreGaps[0].Until.Equal(second) {
		t.Errorf("backup list's restore gaps: %+v, want one from %s until %s", list.RestoreGaps, gapStart, second)
	}
}
