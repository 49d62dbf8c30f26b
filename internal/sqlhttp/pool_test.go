package sqlhttp

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func fakeTarget(f *fakePostgres, id, password string) target {
	return target{id: id, backend: f, user: "u", password: password, dbname: "d"}
}

// use acquires a session of t, runs sql on it and releases it.
func use(t *testing.T, p *pools, tg target, sql string) {
	t.Helper()
	c, err := p.acquire(context.Background(), tg)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer c.Release()
	if _, err := c.Conn().PgConn().Exec(context.Background(), sql).ReadAll(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// waitFor polls cond until it holds (a session's reset runs after the
// release returns).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A second request reuses the first one's session, reset in between.
func TestPoolReusesAResetSession(t *testing.T) {
	f := &fakePostgres{passwords: map[string]bool{"right": true}}
	p := newPools()
	defer p.closeAll()
	tg := fakeTarget(f, "db-1", "right")
	use(t, p, tg, "SET search_path = x")
	waitFor(t, "DISCARD ALL", func() bool { _, _, q := f.counts(); return slices.Contains(q, "DISCARD ALL") })
	use(t, p, tg, "SHOW search_path")
	sessions, _, q := f.counts()
	if sessions != 1 || !slices.Equal(q[:3], []string{"SET search_path = x", "DISCARD ALL", "SHOW search_path"}) {
		t.Fatalf("%d sessions, queries %q", sessions, q)
	}
}

// A session a request left inside a transaction is closed, not reused.
func TestPoolDropsASessionLeftInATransaction(t *testing.T) {
	f := &fakePostgres{passwords: map[string]bool{"right": true}}
	p := newPools()
	defer p.closeAll()
	tg := fakeTarget(f, "db-1", "right")
	use(t, p, tg, "BEGIN")
	use(t, p, tg, "SELECT 1")
	if sessions, _, _ := f.counts(); sessions != 2 {
		t.Fatalf("%d sessions, want 2: the one left in a transaction was reused", sessions)
	}
}

// A wrong password never finds a pool: PostgreSQL refuses it every time,
// before and after the right one was pooled; no pool is kept for it.
func TestPoolWrongPasswordIsAlwaysAskedOfPostgres(t *testing.T) {
	f := &fakePostgres{passwords: map[string]bool{"right": true}}
	p := newPools()
	defer p.closeAll()
	refused := func() {
		t.Helper()
		_, err := p.acquire(context.Background(), fakeTarget(f, "db-1", "wrong"))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "28P01" {
			t.Fatalf("wrong password: %v, want 28P01", err)
		}
	}
	refused()
	use(t, p, fakeTarget(f, "db-1", "right"), "SELECT 1")
	refused()
	p.mu.Lock()
	n := len(p.m)
	p.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d pools, want only the right password's", n)
	}
	// The same password names another database's pool no more.
	refusedElsewhere := &fakePostgres{passwords: map[string]bool{"other": true}}
	if _, err := p.acquire(context.Background(), fakeTarget(refusedElsewhere, "db-2", "right")); err == nil {
		t.Fatal("db-1's password opened db-2")
	}
}

// A database keeps at most PoolsPerDatabase pools; closing its pools ends
// their sessions and leaves other databases' alone.
func TestPoolsPerDatabaseAndClose(t *testing.T) {
	f := &fakePostgres{passwords: map[string]bool{"a": true, "b": true, "c": true, "d": true, "e": true}}
	g := &fakePostgres{passwords: map[string]bool{"a": true}}
	p := newPools()
	defer p.closeAll()
	for _, pw := range []string{"a", "b", "c", "d", "e"} {
		use(t, p, fakeTarget(f, "db-1", pw), "SELECT 1")
	}
	use(t, p, fakeTarget(g, "db-2", "a"), "SELECT 1")
	waitFor(t, "the oldest pool closed", func() bool { _, open, _ := f.counts(); return open == PoolsPerDatabase })
	p.closeDatabase("db-1")
	waitFor(t, "db-1's sessions closed", func() bool { _, open, _ := f.counts(); return open == 0 })
	if _, open, _ := g.counts(); open != 1 {
		t.Fatalf("db-2 has %d sessions open, want 1", open)
	}
}

// The pool key holds no password, and differs with each part.
func TestPoolKey(t *testing.T) {
	p := newPools()
	base := target{id: "db-1", user: "u", password: "pw", dbname: "d"}
	k := p.key(base)
	for _, other := range []target{{id: "db-2", user: "u", password: "pw", dbname: "d"}, {id: "db-1", user: "v", password: "pw", dbname: "d"},
		{id: "db-1", user: "u", password: "pw2", dbname: "d"}, {id: "db-1", user: "u", password: "pw", dbname: "e"}} {
		if p.key(other) == k {
			t.Errorf("%+v shares %+v's pool", other, base)
		}
	}
	if newPools().key(base) == k {
		t.Error("the password's HMAC is the same in another process")
	}
}
