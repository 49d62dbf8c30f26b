package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestDatabaseVolumeFull: a database of the smallest size has its volume
// filled by one table's inserts until PostgreSQL itself answers the
// client with its disk-full error (SQLSTATE 53100); the database stays
// up — the same session and new ones answer, the rows written before are
// there — and once the table is dropped, writes work again and a base
// backup is taken and verified by a restore: the machine, its WAL
// archiving and the host's view of it came through.
//
// Known gap (open): WAL shares the volume. When the volume fills just as
// PostgreSQL starts a new 16 MB WAL segment, its WAL writer PANICs
// ("could not write to file pg_wal/xlogtemp…: No space left on device")
// and the session is lost to crash recovery: this test then fails at "the
// database stays up" (about one run in three here, with the WAL bounded;
// the failed backup logs PostgreSQL's log end). The fix is space kept for
// WAL that table data cannot take.
func TestDatabaseVolumeFull(t *testing.T) {
	needTemplate(t, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := teamClient(t, "db-full")
	d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "tiny", SizeMiB: 128})
	if err != nil {
		t.Fatalf("create database: %v\n%s", err, main.tail())
	}
	t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), d.ID) })
	conn, err := pgx.ConnectConfig(ctx, pgxConfig(t, d, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range []string{
		"create table kept (v text primary key)",
		"insert into kept values ('a'), ('b'), ('c')",
		"create table filler (pad text)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	// ~8 MiB a statement (1 KiB rows, under TOAST's threshold): the
	// 128 MiB volume is full after a dozen at most.
	var full *pgconn.PgError
	t0 := time.Now()
	for i := 0; full == nil; i++ {
		if i == 40 {
			t.Fatalf("40 inserts of 8 MiB into a 128 MiB volume, and no disk-full error")
		}
		_, err := conn.Exec(ctx, "insert into filler select repeat(md5(g::text), 32) from generate_series(1, 8000) g")
		if err == nil {
			continue
		}
		if !errors.As(err, &full) {
			t.Fatalf("insert %d: %v (not a PostgreSQL error: the session was lost)\n%s", i, err, main.tail())
		}
		if full.Code != "53100" {
			t.Fatalf("insert %d: SQLSTATE %s %s, want 53100 (disk full)", i, full.Code, full.Message)
		}
	}
	t.Logf("after %v: PostgreSQL answered %s: %s", time.Since(t0), full.Code, full.Message)

	t.Run("the database stays up", func(t *testing.T) {
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from kept").Scan(&n); err != nil || n != 3 {
			t.Fatalf("the session that filled the volume: %d rows kept, %v", n, err)
		}
		if got, err := pgxQuery(t, pgxConfig(t, d, ""), "select string_agg(v, '' order by v) from kept"); err != nil || got != "abc" {
			t.Fatalf("a new session: %q %v", got, err)
		}
		got, err := c.GetDatabase(ctx, d.ID)
		if err != nil || got.State != "running" || got.MachineID != d.MachineID {
			t.Fatalf("database after the full volume: %+v %v (machine was %s)", got, err, d.MachineID)
		}
	})

	t.Run("after the table is dropped, writes work again", func(t *testing.T) {
		for _, q := range []string{
			"drop table filler",
			"create table again as select g from generate_series(1, 100000) g",
			"insert into kept values ('d')",
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if got, err := pgxQuery(t, pgxConfig(t, d, ""), "select count(*)::text from again"); err != nil || got != "100000" {
			t.Fatalf("rows written after the space came back: %q %v", got, err)
		}
	})

	t.Run("a base backup is taken after it, and restores", func(t *testing.T) {
		b, err := c.BackupDatabase(ctx, d.ID)
		if err != nil || b.State != "done" {
			t.Fatalf("base backup after the full volume: %+v %v\n%s", b, err, main.tail())
		}
		// Its verification restores it in a throwaway machine: wait for
		// it (the machine ends with it).
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
}
