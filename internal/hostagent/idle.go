package hostagent

import (
	"context"
	"io"
	"net"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Activity, for auto-hibernate, is any use of a sandbox through its guest
// agent: each Guest call (every exec, process, file, port-proxy and
// run_code request goes through one) marks the sandbox used, and a
// foreground exec or attach, a file transfer, or a proxied port connection
// keeps it busy until it ends. A sandbox is idle when nothing keeps it
// busy and it has not been used for its AutoHibernateSeconds. Background
// processes inside the guest are not activity: they sleep with the VM and
// go on after a wake.

// used marks the sandbox as used now.
func (s *sandbox) used() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// hold marks the sandbox busy until the returned func is called (once).
func (s *sandbox) hold() (release func()) {
	s.mu.Lock()
	s.busy++
	s.lastUsed = time.Now()
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.busy--
			s.lastUsed = time.Now()
			s.mu.Unlock()
		})
	}
}

// idleFor reports whether the sandbox runs, has auto-hibernate set, nothing
// holds it busy and it was last used at least its auto-hibernate time
// before now. The caller holds s.mu.
func (s *sandbox) idleLocked(now time.Time) bool {
	n := s.rec.AutoHibernateSeconds
	return n > 0 && s.rec.State == pandastack.StateRunning && s.vm != nil && !s.sleeping &&
		s.busy == 0 && now.Sub(s.lastUsed) >= time.Duration(n)*time.Second
}

// autoHibernate hibernates the sandboxes that have been idle for their
// auto-hibernate time. Each runs in its own goroutine, so a slow save does
// not hold up the TTL reaper; s.autoHib keeps one from being started twice.
// One that fails (a full disk) is tried again after another idle period.
func (a *Agent) autoHibernate(ctx context.Context, now time.Time) {
	var due []*sandbox
	a.mu.Lock()
	for _, s := range a.sbx {
		s.mu.Lock()
		if !s.autoHib && s.idleLocked(now) {
			s.autoHib = true
			due = append(due, s)
		}
		s.mu.Unlock()
	}
	a.mu.Unlock()
	for _, s := range due {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() {
				s.mu.Lock()
				s.autoHib = false
				s.mu.Unlock()
			}()
			if _, err := a.hibernate(ctx, s, hibIdle); err != nil {
				// Try again after another idle period, not on every tick.
				s.used()
				a.log.Warn("auto-hibernate failed; the sandbox runs on", "sandbox", s.rec.ID, "err", err)
			}
		}()
	}
}

// busyConn keeps a sandbox busy while a proxied port connection is open.
type busyConn struct {
	net.Conn
	release func()
}

func (c *busyConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// The guest methods below hold the sandbox busy while they run.

func (g *guest) Attach(ctx context.Context, pid int, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	defer g.s.hold()()
	return g.Client.Attach(ctx, pid, fn)
}

func (g *guest) ReadFile(ctx context.Context, path string, w io.Writer, start func(pandastack.FileInfo) error) error {
	defer g.s.hold()()
	return g.Client.ReadFile(ctx, path, w, start)
}

func (g *guest) WriteFile(ctx context.Context, path string, mode uint32, r io.Reader) (pandastack.FileInfo, error) {
	defer g.s.hold()()
	return g.Client.WriteFile(ctx, path, mode, r)
}

func (g *guest) DialPort(ctx context.Context, port int) (net.Conn, error) {
	release := g.s.hold()
	c, err := g.Client.DialPort(ctx, port)
	if err != nil {
		release()
		return nil, err
	}
	return &busyConn{Conn: c, release: release}, nil
}
