package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// lsnValue reads a PostgreSQL LSN ("HI/LO" in hex) for comparison.
func lsnValue(t *testing.T, s string) uint64 {
	t.Helper()
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("lsn %q", s)
	}
	return h<<32 | l
}

// wantRefusal fails unless err is an API error with status and a
// message containing want.
func wantRefusal(t *testing.T, what string, err error, status int, want string) {
	t.Helper()
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Status != status || !strings.Contains(ae.Message, want) {
		t.Fatalf("%s: %v, want HTTP %d with %q", what, err, status, want)
	}
}

// TestDatabaseBackupsPointInTime: a database's WAL reaches object storage
// on its own (no object-store credentials in its machine), a base backup
// is taken on demand, and a restore to a moment makes a new database
// holding exactly what was committed by then — rows from before the
// moment, none from after — with its own password; a moment outside the
// window, and another team, are refused with nothing left behind.
func TestDatabaseBackupsPointInTime(t *testing.T) {
	needTemplate(t, "postgres")
	ctx := context.Background()
	c := teamClient(t, "db-backups")
	other := teamClient(t, "db-backups-other")
	d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "ledger"})
	if err != nil {
		t.Fatalf("create database: %v\n%s", err, main.tail())
	}
	t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), d.ID) })

	_, err = c.RestoreDatabase(ctx, d.ID, "too-soon", time.Now().Add(-time.Second))
	wantRefusal(t, "restore before any backup", err, http.StatusBadRequest, "no finished base backup")

	mustPsql(t, d, "create table entries (v text primary key); insert into entries values ('t1')")
	t0 := time.Now()
	b, err := c.BackupDatabase(ctx, d.ID)
	if err != nil {
		t.Fatalf("base backup: %v\n%s", err, main.tail())
	}
	t.Logf("base backup took %v: %d bytes stored, WAL %s..%s", time.Since(t0), b.SizeBytes, b.StartLSN, b.EndLSN)
	if b.State != "done" || b.SizeBytes == 0 || b.StartLSN == "" || b.FinishedAt == nil {
		t.Fatalf("backup %+v", b)
	}
	objs, _ := filepath.Glob(filepath.Join(main.dataDir, "objects", "data", "databases", d.ID, "base", b.ID, "*"))
	if len(objs) == 0 {
		t.Fatalf("no object under databases/%s/base/%s/ in the server's object store", d.ID, b.ID)
	}

	_, err = other.ListDatabaseBackups(ctx, d.ID)
	wantRefusal(t, "another team lists the backups", err, http.StatusNotFound, "not found")
	_, err = other.RestoreDatabase(ctx, d.ID, "stolen", time.Now())
	wantRefusal(t, "another team restores", err, http.StatusNotFound, "not found")

	// Timestamps a couple of seconds apart, so the guest's clock and the
	// host's need not agree to the millisecond.
	time.Sleep(2 * time.Second)
	mid := time.Now()
	time.Sleep(2 * time.Second)
	mustPsql(t, d, "insert into entries values ('t2')")
	t2 := time.Now()
	// Read after the commit (one psql -c is one transaction): the LSN is
	// past t2's commit record.
	lsn := mustPsql(t, d, "select pg_current_wal_lsn()")

	// Continuous archiving: nothing asks for it, the WAL holding t2 gets
	// to object storage (archive_timeout 30 s in the machine, collected
	// every 10 s by the host).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		l, err := c.ListDatabaseBackups(ctx, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if l.WAL.ArchivedThroughLSN != "" && lsnValue(t, l.WAL.ArchivedThroughLSN) >= lsnValue(t, lsn) {
			t.Logf("WAL through %s (past the commit, at %s) archived %v after the commit", l.WAL.ArchivedThroughLSN, lsn, time.Since(t2))
			if len(l.Backups) != 1 || l.Backups[0].ID != b.ID || l.EarliestRestoreTime == nil {
				t.Fatalf("list %+v", l)
			}
			if wal, _ := filepath.Glob(filepath.Join(main.dataDir, "objects", "data", "databases", d.ID, "wal", l.WAL.LastSegment+".gz")); len(wal) != 1 {
				t.Fatalf("segment %s is not in the server's object store", l.WAL.LastSegment)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("WAL through %s not archived after 3 minutes: %+v\n%s", lsn, l.WAL, main.tail())
		}
		time.Sleep(2 * time.Second)
	}

	rows := func(db *sdk.Database) string {
		return mustPsql(t, db, "select string_agg(v, ',' order by v) from entries")
	}
	t.Run("between t1 and t2: t1's rows, not t2's", func(t *testing.T) {
		t0 := time.Now()
		r, err := c.RestoreDatabase(ctx, d.ID, "ledger-mid", mid)
		if err != nil {
			t.Fatalf("restore: %v\n%s", err, main.tail())
		}
		t.Logf("restore took %v", time.Since(t0))
		t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), r.ID) })
		if r.ID == d.ID || r.Name != "ledger-mid" || r.User != d.User || r.Database != d.Database || r.Password == "" || r.Password == d.Password {
			t.Fatalf("restored %+v from %+v", r, d)
		}
		if got := rows(r); got != "t1" {
			t.Fatalf("restored to %s: rows %q, want t1", mid.Format(time.RFC3339Nano), got)
		}
		conninfo := "host=" + r.Host + " user=" + r.User + " dbname=" + r.Database + " sslmode=require"
		if _, _, ok := psqlRun(t, conninfo, d.Password, "select 1"); ok {
			t.Fatal("the source's password opens the restored database")
		}
	})
	t.Run("after t2: both, into a bigger volume", func(t *testing.T) {
		target := t2.Add(1500 * time.Millisecond)
		for time.Now().Before(target.Add(2 * time.Second)) {
			time.Sleep(200 * time.Millisecond)
		}
		t0 := time.Now()
		r, err := c.RestoreDatabaseWith(ctx, d.ID, sdk.RestoreDatabaseParams{Name: "ledger-now", TargetTime: target, SizeMiB: 2048})
		if err != nil {
			t.Fatalf("restore: %v\n%s", err, main.tail())
		}
		t.Logf("restore took %v", time.Since(t0))
		t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), r.ID) })
		if got := rows(r); got != "t1,t2" {
			t.Fatalf("restored to %s: rows %q, want t1,t2", target.Format(time.RFC3339Nano), got)
		}
		// The volume is the size asked for, and the WAL's bounds are its
		// own (a sixteenth: 128 MB), not the 1 GiB source's (64 MB).
		v, err := c.GetVolume(ctx, r.VolumeID)
		if err != nil || v.SizeMiB != 2048 {
			t.Fatalf("the restored database's volume %s: %+v, %v; want 2048 MiB", r.VolumeID, v, err)
		}
		if got := mustPsql(t, r, "show max_wal_size"); got != "128MB" {
			t.Fatalf("restored into 2048 MiB: max_wal_size %q, want 128MB", got)
		}
	})
	t.Run("the base backup is verified in a throwaway machine", func(t *testing.T) {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			l, err := c.ListDatabaseBackups(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Backups) == 1 && l.Backups[0].Verified {
				break
			}
			if len(l.Backups) != 1 || l.Backups[0].Error != "" || time.Now().After(deadline) {
				t.Fatalf("backups %+v\n%s", l.Backups, main.tail())
			}
			time.Sleep(2 * time.Second)
		}
	})
	t.Cleanup(func() {
		logServerLines(t, d.ID, "base backup taken", "base backup verified", "database restored", "database recovered")
	})
	t.Run("outside the window: a clear error, nothing made", func(t *testing.T) {
		_, err := c.RestoreDatabase(ctx, d.ID, "ledger-early", b.StartedAt.Add(-time.Minute))
		wantRefusal(t, "before the first backup", err, http.StatusBadRequest, "before the earliest restorable time")
		_, err = c.RestoreDatabase(ctx, d.ID, "ledger-later", time.Now().Add(time.Hour))
		wantRefusal(t, "in the future", err, http.StatusBadRequest, "in the future")
		_, err = c.RestoreDatabase(ctx, d.ID, "ledger", mid)
		wantRefusal(t, "a taken name", err, http.StatusConflict, "already exists")
		_, err = c.RestoreDatabaseWith(ctx, d.ID, sdk.RestoreDatabaseParams{Name: "ledger-small", TargetTime: mid, SizeMiB: 512})
		wantRefusal(t, "a volume smaller than the source's", err, http.StatusBadRequest, "smaller than the source's volume (1024 MiB)")
		// Asleep, the database cannot mark its WAL: a moment after the
		// last one archived is refused until it wakes.
		if _, err := c.HibernateDatabase(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		_, err = c.RestoreDatabase(ctx, d.ID, "ledger-asleep", time.Now().Add(-time.Second))
		wantRefusal(t, "after the last archived moment, asleep", err, http.StatusBadRequest, "after the latest archived moment")
		list, err := c.ListDatabases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range list {
			if x.Name == "ledger-early" || x.Name == "ledger-later" || x.Name == "too-soon" || x.Name == "ledger-asleep" || x.Name == "ledger-small" {
				t.Fatalf("a refused restore left database %+v", x)
			}
		}
	})
}

// logServerLines logs the suite server's log lines about database id
// that hold one of msgs: where the time went, for the CI log.
func logServerLines(t *testing.T, id string, msgs ...string) {
	b, err := os.ReadFile(main.log)
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, id) {
			continue
		}
		for _, m := range msgs {
			if strings.Contains(line, m) {
				t.Log(line)
				break
			}
		}
	}
}
