package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestDatabaseVolumeFull: a tenant who fills its database's volume gets
// PostgreSQL's own error (could not extend file: Disk quota exceeded,
// the tables' share of the volume used up) and the database stays up — the server never restarts, the session that hit the error
// goes on, and freeing rows makes room again. Then the tenant churns:
// drops the table and fills the volume again, twice, so WAL needs
// segment files while the tables hold all they may. Without the WAL's room kept from the tables
// (databases/walroom.go) a new segment file on the full volume stops
// PostgreSQL (a PANIC: every session dropped, crash recovery), which this
// catches as reset statistics (a crash restart keeps the postmaster's
// start time) or a lost connection. And the WAL archive, which stopped
// while the volume was full, goes on after it.
func TestDatabaseVolumeFull(t *testing.T) {
	needTemplate(t, "postgres")
	ctx := context.Background()
	c := teamClient(t, "db-full")
	d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "full", SizeMiB: 256})
	if err != nil {
		t.Fatalf("create a 256 MiB database: %v\n%s", err, main.tail())
	}
	t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), d.ID) })
	// A base backup first: the gap a full volume leaves in the WAL
	// archive is then inside the restore window (restoreIntoGap).
	if _, err := c.BackupDatabase(ctx, d.ID); err != nil {
		t.Fatalf("base backup: %v", err)
	}

	cctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, pgxConfig(t, d, ""))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	// startQuery tells PostgreSQL's runs apart: the postmaster's start
	// stays across a crash restart (a PANIC: every backend ended, crash
	// recovery), the statistics do not (crash recovery discards them: a
	// new stats_reset).
	const startQuery = `SELECT pg_postmaster_start_time()::text || ' stats reset ' || coalesce((SELECT stats_reset::text FROM pg_stat_checkpointer), 'never')`
	// walState is what the WAL looked like after the last round: how
	// much was written, the archive slot (the WAL it holds counts against
	// the WAL's room; its receiver writes on the tables' side and stops
	// when they are full) and the checkpoints (a checkpoint far behind
	// its schedule lets WAL outgrow max_wal_size). Any role may read
	// them; the test logs them per round, and they say where a PANIC
	// came from.
	walState := "none yet"
	// When a round first saw the archive slot invalidated, or past its
	// bound with nothing streaming.
	var lostAt time.Time
	const walQuery = `SELECT format('lsn %s; slot %s; checkpoints timed %s requested %s, write %s ms sync %s ms',
  pg_current_wal_lsn(),
  coalesce((SELECT format('active %s status %s holds %s', active, wal_status, pg_size_pretty(pg_current_wal_lsn() - restart_lsn)) FROM pg_replication_slots LIMIT 1), 'none'),
  num_timed, num_requested, round(write_time), round(sync_time)) FROM pg_stat_checkpointer`
	// lost reports a session that ended under the test: whether
	// PostgreSQL restarted (asked on a new session) and what the server
	// logged about the database.
	lost := func(what string, err error) {
		t.Helper()
		now := "unknown (no new session)"
		if c2, err2 := pgx.ConnectConfig(cctx, pgxConfig(t, d, "")); err2 == nil {
			_ = c2.QueryRow(cctx, startQuery).Scan(&now)
			c2.Close(context.Background())
		} else {
			now += ": " + err2.Error()
		}
		t.Logf("server lines about the database:\n%s", serverLines(d.ID))
		t.Logf("WAL before the loss: %s", walState)
		t.Fatalf("%s: the session that filled the volume is gone: %v; PostgreSQL now: %s\n%s", what, err, now, main.tail())
	}
	started := func() string {
		t.Helper()
		var s string
		if err := conn.QueryRow(cctx, startQuery).Scan(&s); err != nil {
			lost("ask PostgreSQL's start", err)
		}
		return s
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(cctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	since := started()
	t.Logf("PostgreSQL: started %s", since)
	// The rows are counted in this session, never by parallel workers: a
	// worker is a new backend, and a new backend on a volume whose tables'
	// share is used up fails when it must rewrite PostgreSQL's
	// relation-cache file (FATAL "could not write init file", after
	// autovacuum of a catalog removed it): the limitation the README
	// states; this test is about the session that hit the limit.
	exec("SET max_parallel_workers_per_gather = 0")
	exec("CREATE TABLE fill (b text)")
	// fill inserts rows of 512 random hex digits (below TOAST's
	// threshold: stored as they are) about 2 MB at a time until a
	// statement fails, and answers that failure and how many statements
	// went in.
	fill := func() (*pgconn.PgError, int) {
		t.Helper()
		const insert = `INSERT INTO fill SELECT (SELECT string_agg(md5(random()::text || g || i), '') FROM generate_series(1, 16) i) FROM generate_series(1, 4000) g`
		for n := 0; n < 400; n++ {
			_, err := conn.Exec(cctx, insert)
			if err == nil {
				continue
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) {
				t.Fatalf("filling the volume after %d statements ended without a PostgreSQL error (the server stopped?): %v\n%s", n, err, main.tail())
			}
			return pe, n
		}
		t.Fatalf("800 MB went into a 256 MiB volume")
		return nil, 0
	}
	for round := 0; round < 3; round++ {
		roundStart := time.Now()
		pe, n := fill()
		// The tables hit their limit before the volume is full: EDQUOT,
		// which PostgreSQL reports as XX000 (it gives 53100 to ENOSPC only).
		if pe.Code != "XX000" || !strings.Contains(pe.Message, "could not extend file") || !strings.Contains(pe.Message, "Disk quota exceeded") {
			t.Logf("%s", serverLines(d.ID, "postgres on its volume"))
			t.Fatalf("round %d: filling the volume ended with %s %q, want XX000 could not extend file ...: Disk quota exceeded", round, pe.Code, pe.Message)
		}
		if now := started(); now != since {
			t.Fatalf("round %d: PostgreSQL restarted (postmaster started %s, was %s) while the volume filled\n%s", round, now, since, main.tail())
		}
		var rows int64
		if err := conn.QueryRow(cctx, "SELECT count(*) FROM fill").Scan(&rows); err != nil {
			lost(fmt.Sprintf("round %d: count the rows written before the volume filled (PostgreSQL started %s)", round, since), err)
		}
		if rows == 0 {
			t.Fatalf("round %d: no rows were written before the volume filled", round)
		}
		t.Logf("round %d: %d statements (%d rows) until %s %q", round, n, rows, pe.Code, pe.Message)
		if err := conn.QueryRow(cctx, walQuery).Scan(&walState); err != nil {
			t.Fatalf("round %d: the WAL's state: %v", round, err)
		}
		t.Logf("round %d: WAL %s", round, walState)
		if lostAt.IsZero() && (strings.Contains(walState, "status lost") || strings.Contains(walState, "active f status unreserved")) {
			lostAt = roundStart
		}
		// Churn: the table goes and the space is written again, WAL
		// included. DROP: on a full volume TRUNCATE (a new, empty TOAST
		// index) and VACUUM (a visibility map) need a new block, which
		// the quota refuses, as a full disk would.
		exec("DROP TABLE fill")
		exec("CREATE TABLE fill (b text)")
	}
	exec("CREATE TABLE after (x int)")
	exec("INSERT INTO after SELECT generate_series(1, 1000)")
	var sum int64
	if err := conn.QueryRow(cctx, "SELECT sum(x) FROM after").Scan(&sum); err != nil || sum != 500500 {
		t.Fatalf("after the volume was freed: sum %d, %v", sum, err)
	}
	if now := started(); now != since {
		t.Fatalf("PostgreSQL restarted (postmaster started %s, was %s)", now, since)
	}
	// The WAL archive goes on. Its receiver writes on the tables' side of
	// the volume, so it stopped while they were full, and the slot it
	// streams through fell more than the WAL budget behind: PostgreSQL
	// invalidated it (every run here). The server makes the slot anew and
	// takes a base backup, from which the restore window starts again.
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var active bool
		var status string
		err := conn.QueryRow(cctx, `SELECT active, wal_status FROM pg_replication_slots`).Scan(&active, &status)
		if err == nil && active && (status == "reserved" || status == "extended") {
			t.Logf("WAL archiving streams again (slot %s)", status)
			break
		}
		if time.Now().After(deadline) {
			t.Logf("server lines about the database:\n%s", serverLines(d.ID))
			t.Logf("the archive loop's warnings (any database):\n%s", serverLines("archive WAL"))
			t.Fatalf("4 minutes after the volume was freed the archive slot is active %v, %s (%v): WAL archiving did not resume", active, status, err)
		}
		time.Sleep(2 * time.Second)
	}
	if lostAt.IsZero() {
		t.Log("the archive slot was never invalidated in this run")
	} else {
		for {
			l, err := c.ListDatabaseBackups(ctx, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			done := false
			for _, b := range l.Backups {
				done = done || (b.State == "done" && b.StartedAt.After(lostAt))
			}
			if done {
				t.Logf("a base backup was taken after the archive's gap")
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no base backup after the archive slot was invalidated (%s): %+v", lostAt.Format(time.RFC3339), l.Backups)
			}
			time.Sleep(2 * time.Second)
		}
		restoreIntoGap(t, c, d.ID, lostAt)
	}
	// A new session through the router works too.
	if out := mustPsql(t, d, "SELECT count(*) FROM after"); out != "1000" {
		t.Fatalf("a new session after the volume was full: %q", out)
	}
}

// restoreIntoGap: the gap a lost archive slot left in database id's WAL
// archive shows in its backup list, closed by the base backup after it,
// and a restore to a moment inside it is refused with 400 naming the gap
// (before, recovery ran out of WAL in a new machine and the restore
// failed late).
func restoreIntoGap(t *testing.T, c *sdk.Client, id string, lostAt time.Time) {
	ctx := context.Background()
	deadline := time.Now().Add(3 * time.Minute)
	var gap sdk.RestoreGap
	for {
		l, err := c.ListDatabaseBackups(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(l.RestoreGaps); n > 0 && l.RestoreGaps[n-1].Until != nil {
			gap = l.RestoreGaps[n-1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backup list shows no closed gap in the WAL archive after the slot was invalidated (%s): %+v", lostAt.Format(time.RFC3339), l)
		}
		time.Sleep(2 * time.Second)
	}
	if !gap.Until.After(gap.From) {
		t.Fatalf("restore gap %s – %s: it ends before it starts", gap.From, gap.Until)
	}
	mid := gap.From.Add(gap.Until.Sub(gap.From) / 2)
	r, err := c.RestoreDatabase(ctx, id, "full-gap", mid)
	if err == nil {
		_ = c.DeleteDatabase(ctx, r.ID)
	}
	var apiErr *sdk.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 400 || !strings.Contains(apiErr.Message, "gap") {
		t.Fatalf("restore to %s, inside the archive's gap %s – %s: %v; want 400 naming the gap", mid, gap.From, gap.Until, err)
	}
	t.Logf("restore inside the gap (%s – %s) refused: %s", gap.From.Format(time.RFC3339), gap.Until.Format(time.RFC3339), apiErr.Message)
}

// serverLines are the suite server's log lines that hold all of words.
func serverLines(words ...string) string {
	b, _ := os.ReadFile(main.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l, w)
		}
		if ok {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
