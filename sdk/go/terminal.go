package pandastack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// TerminalOptions starts a terminal. The zero value runs the user's login
// shell on a 24×80 terminal.
type TerminalOptions struct {
	Cmd            string // command line (default: the login shell)
	User           string
	Cwd            string
	Env            map[string]string
	Rows, Cols     int
	TimeoutSeconds float64
}

// Terminal is an interactive terminal in a sandbox, over a WebSocket
// (GET /v1/sandboxes/{id}/pty). Read returns the terminal's raw output and
// io.EOF once the command has ended (Wait then says how); Write types
// input. If the connection drops, Read reattaches to the session by itself
// and the output missed meanwhile arrives; Close drops the connection and
// leaves the session for a later ReattachTerminal within GraceSeconds.
type Terminal struct {
	SessionID    string
	PID          int
	GraceSeconds int

	s *Sandbox

	mu     sync.Mutex // guards conn, offset, res
	conn   *websocket.Conn
	offset int64 // output bytes received
	rest   []byte
	res    *ExecResult
	err    error
	closed bool
}

type terminalMessage struct {
	Type         string `json:"type"`
	SessionID    string `json:"session_id,omitempty"`
	PID          int    `json:"pid,omitempty"`
	Offset       *int64 `json:"offset,omitempty"`
	GraceSeconds int    `json:"grace_seconds,omitempty"`
	Rows         int    `json:"rows,omitempty"`
	Cols         int    `json:"cols,omitempty"`
	Signal       string `json:"signal,omitempty"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	TimedOut     bool   `json:"timed_out,omitempty"`
	Code         string `json:"code,omitempty"`
	Message      string `json:"message,omitempty"`
}

// OpenTerminal starts a command on a terminal in the sandbox.
func (s *Sandbox) OpenTerminal(ctx context.Context, o TerminalOptions) (*Terminal, error) {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("cmd", o.Cmd)
	set("user", o.User)
	set("cwd", o.Cwd)
	if o.Rows > 0 {
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	if o.Cols > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
	}
	if o.TimeoutSeconds > 0 {
		q.Set("timeout_seconds", strconv.FormatFloat(o.TimeoutSeconds, 'f', -1, 64))
	}
	for k, v := range o.Env {
		q.Add("env", k+"="+v)
	}
	t := &Terminal{s: s}
	if err := t.dial(ctx, q); err != nil {
		return nil, err
	}
	return t, nil
}

// ReattachTerminal connects to a terminal session again, after a dropped
// connection or a Close: offset is the output bytes already received (0:
// everything the server still keeps).
func (s *Sandbox) ReattachTerminal(ctx context.Context, sessionID string, offset int64) (*Terminal, error) {
	t := &Terminal{s: s, SessionID: sessionID, offset: offset}
	if err := t.dial(ctx, t.reattachQuery()); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Terminal) reattachQuery() url.Values {
	return url.Values{"session": {t.SessionID}, "offset": {strconv.FormatInt(t.offset, 10)}}
}

// dial connects and reads the session message.
func (t *Terminal) dial(ctx context.Context, q url.Values) error {
	c := t.s.c
	path := t.s.path("/pty")
	h := http.Header{"User-Agent": {c.userAgent}}
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	conn, resp, err := websocket.Dial(ctx, c.baseURL+path+"?"+q.Encode(), &websocket.DialOptions{HTTPClient: c.http, HTTPHeader: h})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols && resp.Body != nil {
			return readAPIError(resp)
		}
		return fmt.Errorf("pandastack: open terminal in %s: %w", t.s.ID, err)
	}
	conn.SetReadLimit(1 << 20)
	typ, b, err := conn.Read(ctx)
	var m terminalMessage
	if err == nil && (typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m.Type != "session") {
		err = fmt.Errorf("the server's first message is not a session: %q", b)
	}
	if err != nil {
		conn.CloseNow()
		return fmt.Errorf("pandastack: open terminal in %s: %w", t.s.ID, err)
	}
	t.mu.Lock()
	t.conn, t.SessionID, t.PID, t.GraceSeconds = conn, m.SessionID, m.PID, m.GraceSeconds
	if m.Offset != nil {
		t.offset = *m.Offset // output before it was dropped from the server's ring
	}
	t.mu.Unlock()
	return nil
}

// Offset is the number of output bytes received so far.
func (t *Terminal) Offset() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.offset
}

func (t *Terminal) current() *websocket.Conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conn
}

// Read returns output; io.EOF once the command has ended.
func (t *Terminal) Read(p []byte) (int, error) {
	for len(t.rest) == 0 {
		t.mu.Lock()
		done, err, closed := t.res != nil, t.err, t.closed
		t.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case done:
			return 0, io.EOF
		case closed:
			return 0, errTerminalClosed
		}
		conn := t.current()
		typ, b, rerr := conn.Read(context.Background())
		if rerr != nil {
			if t.isClosed() {
				return 0, errTerminalClosed
			}
			if websocket.CloseStatus(rerr) == websocket.StatusPolicyViolation {
				t.fail(fmt.Errorf("pandastack: terminal %s: another client attached to the session", t.SessionID))
				continue
			}
			if err := t.reattach(); err != nil {
				t.fail(fmt.Errorf("pandastack: terminal %s: connection lost (%v) and reattaching failed: %w", t.SessionID, rerr, err))
			}
			continue
		}
		if typ == websocket.MessageBinary {
			t.mu.Lock()
			t.offset += int64(len(b))
			t.mu.Unlock()
			t.rest = b
			continue
		}
		var m terminalMessage
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case "exit":
			res := &ExecResult{Signal: m.Signal, TimedOut: m.TimedOut}
			if m.ExitCode != nil {
				res.ExitCode = *m.ExitCode
			}
			t.mu.Lock()
			t.res = res
			t.mu.Unlock()
			conn.Close(websocket.StatusNormalClosure, "")
		case "error":
			e := &APIError{Code: m.Code, Message: m.Message}
			if m.Code == "invalid_argument" {
				continue // a control message the server refused; the session goes on
			}
			t.fail(e)
		}
	}
	n := copy(p, t.rest)
	t.rest = t.rest[n:]
	return n, nil
}

var errTerminalClosed = errors.New("pandastack: terminal connection closed")

func (t *Terminal) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

func (t *Terminal) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

// reattach dials the session again, a few times within its grace period.
func (t *Terminal) reattach() error {
	var err error
	for i, wait := 0, 200*time.Millisecond; i < 5; i, wait = i+1, wait*2 {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		t.mu.Lock()
		q := t.reattachQuery()
		t.mu.Unlock()
		err = t.dial(ctx, q)
		cancel()
		if err == nil || errors.Is(err, ErrNotFound) {
			return err
		}
		time.Sleep(wait)
	}
	return err
}

// Write types input into the terminal.
func (t *Terminal) Write(p []byte) (int, error) {
	if err := t.current().Write(context.Background(), websocket.MessageBinary, p); err != nil {
		return 0, fmt.Errorf("pandastack: terminal %s: send input: %w", t.SessionID, err)
	}
	return len(p), nil
}

func (t *Terminal) control(ctx context.Context, m terminalMessage) error {
	b, _ := json.Marshal(m)
	if err := t.current().Write(ctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("pandastack: terminal %s: send %s: %w", t.SessionID, m.Type, err)
	}
	return nil
}

// Resize changes the terminal's size; the program gets SIGWINCH.
func (t *Terminal) Resize(ctx context.Context, rows, cols int) error {
	return t.control(ctx, terminalMessage{Type: "resize", Rows: rows, Cols: cols})
}

// Signal sends a signal (e.g. "INT") to the terminal's foreground process
// group, as typing ^C would.
func (t *Terminal) Signal(ctx context.Context, signal string) error {
	return t.control(ctx, terminalMessage{Type: "signal", Signal: signal})
}

// Kill ends the terminal's command; Read then returns io.EOF.
func (t *Terminal) Kill(ctx context.Context) error {
	return t.control(ctx, terminalMessage{Type: "kill"})
}

// Wait returns how the command ended, once Read has returned io.EOF.
func (t *Terminal) Wait() (*ExecResult, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.res == nil && t.err == nil {
		return nil, errors.New("pandastack: the terminal's command has not ended (read its output to the end first)")
	}
	return t.res, t.err
}

// Close drops the connection. The session lives on for GraceSeconds, for
// ReattachTerminal; to end the command, Kill it (or exit its shell) first.
func (t *Terminal) Close() error {
	t.mu.Lock()
	t.closed = true
	c := t.conn
	t.mu.Unlock()
	return c.CloseNow()
}
