package terminals

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Session is one terminal: its command, its recent output, its client.
type Session struct {
	ID, Team, Sandbox string

	m    *Manager
	term pandastack.Terminal
	log  *slog.Logger

	mu     sync.Mutex
	cond   *sync.Cond
	ring   *ring
	client int // generation of the attached client; 0 when none
	gen    int
	grace  *time.Timer
	done   bool // output drained, command ended
	result pandastack.ExecResult
	err    error
	ended  chan struct{}
	killed bool
}

// PID is the command's process id in the sandbox.
func (s *Session) PID() int { return s.term.PID() }

// Ended is closed once the command has ended and its output is kept.
func (s *Session) Ended() <-chan struct{} { return s.ended }

// pump moves the terminal's output into the ring. It never waits for a
// client: one that reads too slowly loses the oldest output, not the
// command's progress.
func (s *Session) pump() {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.term.Read(buf)
		s.mu.Lock()
		if n > 0 {
			s.ring.write(buf[:n])
		}
		if err != nil {
			s.done = true
			if errors.Is(err, io.EOF) {
				s.result, s.err = s.term.Wait()
			} else {
				s.err = err
			}
		}
		s.mu.Unlock()
		s.cond.Broadcast()
		if err != nil {
			break
		}
	}
	s.term.Close()
	close(s.ended)
	s.log.Info("terminal ended", "exit_code", s.result.ExitCode, "signal", s.result.Signal, "err", s.err)
	// Kept a grace period for a client that reattaches to learn the end.
	time.AfterFunc(s.m.cfg.Grace, func() { s.m.forget(s) })
}

// armLocked starts the grace period of a session without a client.
func (s *Session) armLocked() {
	if s.grace != nil {
		s.grace.Stop()
	}
	gen := s.gen
	s.grace = time.AfterFunc(s.m.cfg.Grace, func() {
		s.mu.Lock()
		idle := s.client == 0 && s.gen == gen
		s.mu.Unlock()
		if idle {
			s.log.Info("terminal session had no client for its grace period; ending it")
			s.Kill()
		}
	})
}

// Kill ends the command and forgets the session.
func (s *Session) Kill() {
	s.mu.Lock()
	s.killed = true
	s.mu.Unlock()
	s.cond.Broadcast()
	s.term.Close()
	s.m.forget(s)
}

// Input types bytes into the terminal.
func (s *Session) Input(p []byte) error {
	_, err := s.term.Write(p)
	return err
}

// Resize changes the terminal's size.
func (s *Session) Resize(ctx context.Context, rows, cols int) error {
	return s.term.Resize(ctx, rows, cols)
}

// Signal sends a signal to the terminal's foreground process group.
func (s *Session) Signal(ctx context.Context, sig string) error {
	return s.term.Signal(ctx, sig)
}

// Attachment is one client's view of a session.
type Attachment struct {
	s    *Session
	gen  int
	next int64
}

// Attach makes the caller the session's client, from output offset from
// (the bytes it already has; 0 for all that is kept). A client attached
// before is detached: its Next returns an error.
func (s *Session) Attach(from int64) *Attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.client = s.gen
	if s.grace != nil {
		s.grace.Stop()
	}
	s.cond.Broadcast()
	return &Attachment{s: s, gen: s.gen, next: from}
}

// Offset is where the attachment's next output starts.
func (a *Attachment) Offset() int64 {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if a.next < a.s.ring.start {
		return a.s.ring.start
	}
	return a.next
}

// Next waits for output past what the client has, and returns it with the
// offset it starts at (later than asked when older output was dropped). At
// the end it returns io.EOF; then Result says how the command ended.
func (a *Attachment) Next(ctx context.Context) ([]byte, int64, error) {
	s := a.s
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		switch {
		case s.client != a.gen:
			return nil, 0, errDetached
		case s.killed && !s.done:
			return nil, 0, pandastack.Errorf(pandastack.EGone, "terminal session %s was ended", s.ID)
		case ctx.Err() != nil:
			return nil, 0, ctx.Err()
		}
		if b, at := s.ring.since(a.next); len(b) > 0 {
			a.next = at + int64(len(b))
			return b, at, nil
		}
		if s.done {
			return nil, a.next, io.EOF
		}
		s.cond.Wait()
	}
}

// Result is how the command ended (after Next returned io.EOF).
func (a *Attachment) Result() (pandastack.ExecResult, error) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	return a.s.result, a.s.err
}

// Detach leaves the session; if no other client took it over, its grace
// period starts.
func (a *Attachment) Detach() {
	s := a.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == a.gen {
		s.client = 0
		if !s.done {
			s.armLocked()
		}
	}
}

// IsDetached says whether err means another client took the session over.
func IsDetached(err error) bool { return errors.Is(err, errDetached) }

// AttachNew makes the caller the session's client from the output written
// from now on: a client that follows the terminal rather than replays it
// (E2B's Connect).
func (s *Session) AttachNew() *Attachment {
	s.mu.Lock()
	end := s.ring.end()
	s.mu.Unlock()
	return s.Attach(end)
}
