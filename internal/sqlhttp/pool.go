package sqlhttp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pandastack/pandastack/internal/router"
)

// Sessions are pooled (jackc/pgx/v5/pgxpool): a new PostgreSQL session in
// a database's machine — a backend forked and authenticated under TCG — is
// most of a request's time, so each database keeps a few authenticated
// sessions for a short while.
//
// A pool belongs to one database, role, database name and password: a
// request reuses a session only when it names all four as the session
// was opened with, so PostgreSQL has checked that very password (a wrong
// one, or another database's, never finds a pool and goes to PostgreSQL).
// The password is kept as an HMAC under a key of this process only. Each
// session is reset (DISCARD ALL) after every request before it is used
// again, and a session a request left inside a transaction is closed, so
// no state passes from one request to the next. A batch runs on one
// session. Sessions idle for PoolIdle are closed, none lives longer than
// PoolLifetime (a password changed inside the database stops being
// accepted by then), and the databases service closes a database's pools
// when it is deleted, hibernated or moved to a new machine (ClosePools).
// A pooled session is an open connection to the database's machine: scale
// to zero counts its idle time from when the last one closed, up to
// PoolIdle plus a health-check period after the last request.
const (
	// PoolConns caps the sessions of one pool.
	PoolConns = 4
	// PoolsPerDatabase caps the authenticated pools of one database
	// (roles or passwords used at once); the least recently used goes.
	PoolsPerDatabase = 4
	PoolIdle         = 15 * time.Second
	PoolLifetime     = 5 * time.Minute
)

// poolKey names a pool: database id, role, database name and the
// password's HMAC.
type poolKey struct {
	id, user, dbname string
	secret           [sha256.Size]byte
}

// pool is one pgxpool and what the cap needs.
type pool struct {
	p      *pgxpool.Pool
	authed bool      // a session was opened: the password is PostgreSQL's
	used   time.Time // the last acquire
}

// pools holds the pools of every database.
type pools struct {
	mac []byte

	mu    sync.Mutex
	m     map[poolKey]*pool
	swept time.Time // the last sweep of unused pools
}

func newPools() *pools {
	mac := make([]byte, 32)
	_, _ = rand.Read(mac)
	return &pools{mac: mac, m: map[poolKey]*pool{}}
}

// target is what a request connects to.
type target struct {
	id       string // the database id (its host's first label)
	backend  router.Backend
	user     string
	password string
	dbname   string
}

func (p *pools) key(t target) poolKey {
	h := hmac.New(sha256.New, p.mac)
	h.Write([]byte(t.password))
	k := poolKey{id: t.id, user: t.user, dbname: t.dbname}
	copy(k.secret[:], h.Sum(nil))
	return k
}

// acquire returns a session of t's pool, opening the pool (and a session)
// when there is none. A pool whose first session PostgreSQL refused is
// dropped: it never holds a password PostgreSQL has not accepted.
func (p *pools) acquire(ctx context.Context, t target) (*pgxpool.Conn, error) {
	k := p.key(t)
	p.mu.Lock()
	p.sweepLocked(time.Now())
	e := p.m[k]
	if e == nil {
		pp, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), poolConfig(t))
		if err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("pool for database %s: %w", t.id, err)
		}
		e = &pool{p: pp}
		p.m[k] = e
	}
	e.used = time.Now()
	p.mu.Unlock()
	c, err := e.p.Acquire(ctx)
	if err != nil {
		// A pool that never opened a session, or whose password
		// PostgreSQL refuses now (changed inside the database), goes.
		var pe *pgconn.PgError
		refused := errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28")
		p.mu.Lock()
		drop := (!e.authed || refused) && p.m[k] == e
		if drop {
			delete(p.m, k)
		}
		p.mu.Unlock()
		if drop {
			go e.p.Close()
		}
		return nil, err
	}
	p.authenticated(k, e)
	return c, nil
}

// authenticated marks e's password as PostgreSQL's and keeps at most
// PoolsPerDatabase such pools for its database.
func (p *pools) authenticated(k poolKey, e *pool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.authed {
		return
	}
	e.authed = true
	n := 0
	var oldest poolKey
	var old *pool
	for ok, o := range p.m {
		if ok.id != k.id || !o.authed {
			continue
		}
		n++
		if o != e && (old == nil || o.used.Before(old.used)) {
			oldest, old = ok, o
		}
	}
	if n > PoolsPerDatabase && old != nil {
		delete(p.m, oldest)
		go old.p.Close() // waits for its sessions in use
	}
}

// sweepLocked closes, every PoolIdle at most, the pools that have had no
// session and no use for PoolIdle: their health checks stop too. The
// caller holds p.mu.
func (p *pools) sweepLocked(now time.Time) {
	if now.Sub(p.swept) < PoolIdle {
		return
	}
	p.swept = now
	for k, e := range p.m {
		if now.Sub(e.used) >= PoolIdle && e.p.Stat().TotalConns() == 0 {
			delete(p.m, k)
			go e.p.Close()
		}
	}
}

// closeDatabase closes every pool of database id.
func (p *pools) closeDatabase(id string) int {
	p.mu.Lock()
	var gone []*pool
	for k, e := range p.m {
		if k.id == id {
			gone = append(gone, e)
			delete(p.m, k)
		}
	}
	p.mu.Unlock()
	for _, e := range gone {
		go e.p.Close()
	}
	return len(gone)
}

// closeAll closes every pool and waits for them.
func (p *pools) closeAll() {
	p.mu.Lock()
	all := p.m
	p.m = map[poolKey]*pool{}
	p.mu.Unlock()
	for _, e := range all {
		e.p.Close()
	}
}

// poolConfig is t's pool: sessions reached through its route's backend
// (waking the machine if it sleeps), reset after each request.
func poolConfig(t target) *pgxpool.Config {
	cfg, _ := pgxpool.ParseConfig("sslmode=disable")
	cc := cfg.ConnConfig
	cc.Host, cc.Port, cc.User, cc.Password, cc.Database = "db", 5432, t.user, t.password, t.dbname
	cc.Fallbacks = nil
	cc.RuntimeParams = map[string]string{"application_name": "sql-over-http"}
	cc.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"db"}, nil }
	backend := t.backend
	cc.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		t0 := time.Now()
		c, err := backend.Dial(ctx)
		if tm := timingOf(ctx); tm != nil {
			tm.dial += time.Since(t0)
		}
		return c, err
	}
	// Queries go through the PgConn (unnamed statements); DISCARD ALL
	// would drop whatever a cache kept.
	cc.StatementCacheCapacity, cc.DescriptionCacheCapacity = 0, 0
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.MinConns, cfg.MaxConns = 0, PoolConns
	cfg.MaxConnIdleTime, cfg.MaxConnLifetime, cfg.MaxConnLifetimeJitter = PoolIdle, PoolLifetime, PoolLifetime/10
	cfg.HealthCheckPeriod = PoolIdle / 3
	cfg.AfterRelease = reset
	return cfg
}

// reset clears what a request left in its session: settings, temporary
// tables, prepared statements, cursors, LISTENs, advisory locks. A
// session it cannot reset is closed.
func reset(c *pgx.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.PgConn().Exec(ctx, "DISCARD ALL").ReadAll()
	return err == nil
}
