// Package terminals keeps interactive terminal sessions in sandboxes: a
// command on a guest pseudo-terminal (pandastack.Terminal), its recent
// output in a bounded ring, and at most one attached client at a time. A
// session whose client went away lives on for a grace period, so a client
// whose connection dropped can reattach by the session's id and get the
// output it missed; after the grace period nobody reattached, the command
// is killed.
package terminals

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Defaults for Config.
const (
	DefaultGrace      = time.Minute
	DefaultRingBytes  = 256 << 10
	DefaultMaxPerTeam = 32
)

// Config tunes a Manager.
type Config struct {
	// Grace is how long a session without a client lives (default 1m).
	Grace time.Duration
	// RingBytes bounds the output a session keeps for a reattach (256 KiB).
	RingBytes int
	// MaxPerTeam bounds a team's open sessions (32).
	MaxPerTeam int
	Log        *slog.Logger
}

// Manager holds the sessions of one server.
type Manager struct {
	cfg      Config
	mu       sync.Mutex
	sessions map[string]*Session
	closed   bool
}

// New returns an empty Manager.
func New(cfg Config) *Manager {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.RingBytes <= 0 {
		cfg.RingBytes = DefaultRingBytes
	}
	if cfg.MaxPerTeam <= 0 {
		cfg.MaxPerTeam = DefaultMaxPerTeam
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, sessions: map[string]*Session{}}
}

// Grace is how long a session without a client lives.
func (m *Manager) Grace() time.Duration { return m.cfg.Grace }

// Start opens a session: start runs the command (it is called only once
// the team has room for another session). The session starts detached; its
// grace period runs until the first Attach.
func (m *Manager) Start(ctx context.Context, team, sandbox string, start func(context.Context) (pandastack.Terminal, error)) (*Session, error) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, pandastack.Errorf(pandastack.EUnavailable, "the server is shutting down")
	}
	n := 0
	for _, s := range m.sessions {
		if s.Team == team {
			n++
		}
	}
	if n >= m.cfg.MaxPerTeam {
		m.mu.Unlock()
		return nil, pandastack.Errorf(pandastack.EQuota, "team %s has %d open terminal sessions, the most it may have; end one (exit its shell) or wait %s for a detached one to end", team, n, m.cfg.Grace)
	}
	s := &Session{ID: pandastack.NewID("term_"), Team: team, Sandbox: sandbox, m: m, ring: newRing(m.cfg.RingBytes), ended: make(chan struct{})}
	s.cond = sync.NewCond(&s.mu)
	m.sessions[s.ID] = s // held while it starts, so the count is right
	m.mu.Unlock()
	t, err := start(ctx)
	if err != nil {
		m.forget(s)
		return nil, err
	}
	s.term = t
	s.log = m.cfg.Log.With("terminal", s.ID, "sandbox", sandbox, "team", team)
	s.log.InfoContext(ctx, "terminal started", "pid", t.PID())
	go s.pump()
	s.mu.Lock()
	s.armLocked()
	s.mu.Unlock()
	return s, nil
}

// Get finds a team's session in a sandbox; any other session is ENotFound.
func (m *Manager) Get(team, sandbox, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	if s == nil || s.Team != team || s.Sandbox != sandbox {
		return nil, pandastack.Errorf(pandastack.ENotFound, "terminal session %s not found in sandbox %s (a detached session ends %s after its client left)", id, sandbox, m.cfg.Grace)
	}
	return s, nil
}

// Count is the number of open sessions.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Close kills every session.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	all := make([]*Session, 0, len(m.sessions))
	for _, s := range m.sessions {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		s.Kill()
	}
}

func (m *Manager) forget(s *Session) {
	m.mu.Lock()
	if m.sessions[s.ID] == s {
		delete(m.sessions, s.ID)
	}
	m.mu.Unlock()
}

// errDetached ends an attachment another client took over.
var errDetached = fmt.Errorf("another client attached to the terminal session")
