package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/coder/websocket"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/terminals"
)

// An interactive terminal is a WebSocket (GET /v1/sandboxes/{id}/pty,
// github.com/coder/websocket on the server side). Binary messages carry the
// terminal's bytes both ways: output from the server, typed input from the
// client. Text messages are JSON control messages: from the server
// {"type":"session"} first, then {"type":"exit"} at the end (or
// {"type":"error"}); from the client {"type":"resize","rows","cols"},
// {"type":"signal","signal"} and {"type":"kill"}. The session outlives a
// dropped connection for a grace period: reconnect with ?session=ID and
// &offset=N (the output bytes already received) to get the rest.

// terminalMessage is a control message, either way.
type terminalMessage struct {
	Type string `json:"type"`
	// session
	SessionID    string `json:"session_id,omitempty"`
	PID          int    `json:"pid,omitempty"`
	Offset       *int64 `json:"offset,omitempty"`
	GraceSeconds int    `json:"grace_seconds,omitempty"`
	// resize
	Rows int `json:"rows,omitempty"`
	Cols int `json:"cols,omitempty"`
	// signal
	Signal string `json:"signal,omitempty"`
	// exit
	ExitCode *int `json:"exit_code,omitempty"`
	TimedOut bool `json:"timed_out,omitempty"`
	// error
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// maxTerminalInput bounds one input message (a paste).
const maxTerminalInput = 1 << 20

func (s *Server) terminal(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	// Everything but the upgrade itself is checked first, so a plain GET
	// (what a client whose WebSocket API hides the HTTP answer can send to
	// learn why an upgrade failed) gets the same JSON error.
	q := r.URL.Query()
	team := caller(r).team.ID
	var sess *terminals.Session
	var from int64
	var req pandastack.TerminalRequest
	if id := q.Get("session"); id != "" {
		if from, err = queryInt64(q.Get("offset")); err != nil {
			return pandastack.Errorf(pandastack.EInvalid, "offset must be a whole number of bytes, not %q", q.Get("offset"))
		}
		if sess, err = s.terms.Get(team, sb.ID, id); err != nil {
			return err
		}
	} else if req, err = terminalRequest(q); err != nil {
		return err
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return pandastack.Errorf(pandastack.EInvalid, "GET /v1/sandboxes/{id}/pty is a WebSocket: send Connection: Upgrade and Upgrade: websocket")
	}
	if sess == nil {
		g, err := s.guest(r)
		if err != nil {
			return err
		}
		sess, err = s.terms.Start(r.Context(), team, sb.ID, func(ctx context.Context) (pandastack.Terminal, error) {
			return g.Terminal(ctx, req)
		})
		if err != nil {
			return wrap(err, "start terminal in sandbox "+sb.ID)
		}
	}
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil // Accept has answered the client
	}
	c.SetReadLimit(maxTerminalInput)
	s.serveTerminal(r, c, sess, from)
	return nil
}

func queryInt64(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && n < 0 {
		err = errors.New("negative")
	}
	return n, err
}

// terminalRequest reads a new terminal from the query: rows and cols
// (default 24×80), cmd (default the user's login shell), user, cwd, env
// (repeated KEY=VALUE), timeout_seconds.
func terminalRequest(q map[string][]string) (pandastack.TerminalRequest, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	req := pandastack.TerminalRequest{Cmd: get("cmd"), User: get("user"), Cwd: get("cwd"), Rows: 24, Cols: 80}
	for _, k := range []string{"rows", "cols"} {
		if v := get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return req, pandastack.Errorf(pandastack.EInvalid, "%s must be a whole number, not %q", k, v)
			}
			if k == "rows" {
				req.Rows = n
			} else {
				req.Cols = n
			}
		}
	}
	if err := pandastack.CheckTerminalSize(req.Rows, req.Cols); err != nil {
		return req, err
	}
	if v := get("timeout_seconds"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f != f {
			return req, pandastack.Errorf(pandastack.EInvalid, "timeout_seconds must be a number of seconds, not %q", v)
		}
		req.TimeoutSeconds = f
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return req, pandastack.Errorf(pandastack.EInvalid, "env must be KEY=VALUE, not %q", kv)
		}
		if req.Env == nil {
			req.Env = map[string]string{}
		}
		req.Env[k] = v
	}
	return req, nil
}

// serveTerminal relays one client's WebSocket to a session until the
// command ends, the client goes (the session waits for a reattach), or
// another client takes the session over.
func (s *Server) serveTerminal(r *http.Request, c *websocket.Conn, sess *terminals.Session, from int64) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	a := sess.Attach(from)
	defer a.Detach()
	send := func(m terminalMessage) error {
		b, _ := json.Marshal(m)
		return c.Write(ctx, websocket.MessageText, b)
	}
	off := a.Offset()
	if send(terminalMessage{Type: "session", SessionID: sess.ID, PID: sess.PID(), Offset: &off, GraceSeconds: int(s.terms.Grace().Seconds())}) != nil {
		c.CloseNow()
		return
	}
	// Client → session: input and control, until the connection drops.
	go func() {
		defer cancel()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if err := sess.Input(b); err != nil {
					return
				}
				continue
			}
			if err := s.terminalControl(ctx, sess, b); err != nil {
				code, msg := publicError(err)
				if send(terminalMessage{Type: "error", Code: code, Message: msg}) != nil {
					return
				}
			}
		}
	}()
	for {
		b, _, err := a.Next(ctx)
		switch {
		case err == nil:
			if c.Write(ctx, websocket.MessageBinary, b) != nil {
				c.CloseNow()
				return
			}
			continue
		case errors.Is(err, io.EOF):
			res, rerr := a.Result()
			sess.Kill() // delivered below: nothing is left to reattach to
			if rerr != nil {
				code, msg := publicError(rerr)
				_ = send(terminalMessage{Type: "error", Code: code, Message: msg})
			} else {
				_ = send(terminalMessage{Type: "exit", ExitCode: &res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut})
			}
			c.Close(websocket.StatusNormalClosure, "the command ended")
		case terminals.IsDetached(err):
			c.Close(websocket.StatusPolicyViolation, "another client attached to this terminal session")
		case ctx.Err() != nil:
			c.CloseNow() // the client went away: the session waits for a reattach
		default:
			code, msg := publicError(err)
			_ = send(terminalMessage{Type: "error", Code: code, Message: msg})
			c.Close(websocket.StatusNormalClosure, "the terminal session ended")
		}
		return
	}
}

// terminalControl applies one control message from the client.
func (s *Server) terminalControl(ctx context.Context, sess *terminals.Session, b []byte) error {
	var m terminalMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return pandastack.Errorf(pandastack.EInvalid, "a text message must be a JSON control message: %v", err)
	}
	switch m.Type {
	case "resize":
		if err := pandastack.CheckTerminalSize(m.Rows, m.Cols); err != nil {
			return err
		}
		return sess.Resize(ctx, m.Rows, m.Cols)
	case "signal":
		name, err := SignalName(m.Signal)
		if err != nil {
			return err
		}
		return sess.Signal(ctx, name)
	case "kill":
		return sess.Signal(ctx, "KILL")
	}
	return pandastack.Errorf(pandastack.EInvalid, "unknown control message type %q (resize, signal, kill)", m.Type)
}
