package terminals

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// pipeTerminal is a FAKE pandastack.Terminal for the session logic: the
// test writes its output; real terminals are tested against the real guest
// agent (guestconn) and in real sandboxes (e2e).
type pipeTerminal struct {
	r      *io.PipeReader
	w      *io.PipeWriter
	mu     sync.Mutex
	input  bytes.Buffer
	closed bool
}

func newPipeTerminal() *pipeTerminal {
	r, w := io.Pipe()
	return &pipeTerminal{r: r, w: w}
}

func (p *pipeTerminal) Read(b []byte) (int, error) { return p.r.Read(b) }
func (p *pipeTerminal) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.input.Write(b)
}
func (p *pipeTerminal) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.w.CloseWithError(io.EOF)
	return nil
}
func (p *pipeTerminal) isClosed() bool                         { p.mu.Lock(); defer p.mu.Unlock(); return p.closed }
func (p *pipeTerminal) PID() int                               { return 42 }
func (p *pipeTerminal) Resize(context.Context, int, int) error { return nil }
func (p *pipeTerminal) Signal(context.Context, string) error   { return nil }
func (p *pipeTerminal) Wait() (pandastack.ExecResult, error) {
	return pandastack.ExecResult{ExitCode: 3}, nil
}

func start(t *testing.T, m *Manager, team string) (*Session, *pipeTerminal) {
	t.Helper()
	pt := newPipeTerminal()
	s, err := m.Start(context.Background(), team, "sb_1", func(context.Context) (pandastack.Terminal, error) { return pt, nil })
	if err != nil {
		t.Fatal(err)
	}
	return s, pt
}

func next(t *testing.T, a *Attachment) (string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, at, err := a.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), at
}

func TestRingKeepsTheLastBytes(t *testing.T) {
	r := newRing(8)
	r.write([]byte("abcdef"))
	r.write([]byte("ghij"))
	if b, at := r.since(0); string(b) != "cdefghij" || at != 2 {
		t.Fatalf("since(0) = %q at %d", b, at)
	}
	if b, at := r.since(7); string(b) != "hij" || at != 7 {
		t.Fatalf("since(7) = %q at %d", b, at)
	}
	r.write([]byte("0123456789"))
	if b, at := r.since(0); string(b) != "23456789" || at != 12 || cap(r.buf) > 16 {
		t.Fatalf("since(0) = %q at %d (cap %d)", b, at, cap(r.buf))
	}
}

// A client that drops and reattaches gets what it missed, from the offset
// it had; another team cannot see the session; the end reaches the client.
func TestReattach(t *testing.T) {
	m := New(Config{Grace: time.Minute})
	s, pt := start(t, m, "team_a")
	a := s.Attach(0)
	pt.w.Write([]byte("hello "))
	got, _ := next(t, a)
	if got != "hello " {
		t.Fatalf("got %q", got)
	}
	a.Detach()
	pt.w.Write([]byte("while away"))
	if _, err := m.Get("team_b", "sb_1", s.ID); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("other team: %v", err)
	}
	s2, err := m.Get("team_a", "sb_1", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	b := s2.Attach(6)
	if got, at := next(t, b); got != "while away" || at != 6 {
		t.Fatalf("reattach got %q at %d", got, at)
	}
	if _, _, err := a.Next(context.Background()); !IsDetached(err) {
		t.Fatalf("old client: %v", err)
	}
	if err := s.Input([]byte("ls\r")); err != nil || pt.input.String() != "ls\r" {
		t.Fatalf("input %q, %v", pt.input.String(), err)
	}
	pt.w.Close()
	if _, _, err := b.Next(context.Background()); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if res, err := b.Result(); err != nil || res.ExitCode != 3 {
		t.Fatalf("result %+v %v", res, err)
	}
}

// A session nobody attaches to within the grace period is killed and
// forgotten.
func TestGraceEndsDetachedSession(t *testing.T) {
	m := New(Config{Grace: 50 * time.Millisecond})
	s, pt := start(t, m, "team_a")
	a := s.Attach(0)
	a.Detach()
	for deadline := time.Now().Add(5 * time.Second); !pt.isClosed(); {
		if time.Now().After(deadline) {
			t.Fatal("a detached session outlived its grace period")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for deadline := time.Now().Add(5 * time.Second); m.Count() > 0; {
		if time.Now().After(deadline) {
			t.Fatal("session not forgotten")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSessionsPerTeamBounded(t *testing.T) {
	m := New(Config{MaxPerTeam: 2})
	start(t, m, "team_a")
	start(t, m, "team_a")
	_, err := m.Start(context.Background(), "team_a", "sb_1", func(context.Context) (pandastack.Terminal, error) { return newPipeTerminal(), nil })
	if pandastack.ErrorCode(err) != pandastack.EQuota {
		t.Fatalf("third session: %v", err)
	}
	start(t, m, "team_b")
	// A start that fails leaves no session behind.
	_, err = m.Start(context.Background(), "team_c", "sb_1", func(context.Context) (pandastack.Terminal, error) { return nil, errors.New("boom") })
	if err == nil || m.Count() != 3 {
		t.Fatalf("failed start: %v, %d sessions", err, m.Count())
	}
	m.Close()
	if m.Count() != 0 {
		t.Fatalf("%d sessions after Close", m.Count())
	}
}

// AttachNew follows the output written from then on, not what is kept.
func TestAttachNewFollowsFromNow(t *testing.T) {
	m := New(Config{Grace: time.Minute})
	s, pt := start(t, m, "team_1")
	first := s.Attach(0)
	pt.w.Write([]byte("before"))
	if got, _ := next(t, first); got != "before" {
		t.Fatalf("first client got %q", got)
	}
	first.Detach()
	later := s.AttachNew()
	pt.w.Write([]byte("after"))
	if got, at := next(t, later); got != "after" || at != int64(len("before")) {
		t.Fatalf("AttachNew got %q at %d, want \"after\" at %d", got, at, len("before"))
	}
	s.Kill()
}
