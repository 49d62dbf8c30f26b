package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/terminals"
)

// A process started with a pty is a terminal session (internal/terminals),
// as in PandaStack's own API: it survives its client. The Start stream
// that made it is its first client; when that client goes away (the SDK's
// handle.disconnect, a dropped connection) the session waits a grace
// period (terminals.DefaultGrace) for Process/Connect by its pid (the
// SDK's pty.connect) to follow it again, from the output written from then
// on, as envd does; after the grace period with no client it is killed.
// One client follows a session at a time: a Connect takes it over from
// the one before, whose stream ends.

// ptySpec is process.PTY: {"size":{"cols","rows"}}.
type ptySpec struct {
	Size struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	} `json:"size"`
}

// startPty: process.Process/Start with a pty (the SDK's pty.create). Its
// output is data.pty events, SendInput with input.pty types into it,
// Update resizes it, SendSignal reaches it by pid, Connect follows it
// again. The Connect-Timeout-Ms deadline bounds its life.
func (s *Server) startPty(w http.ResponseWriter, r *http.Request, c *sandboxCall, raw json.RawMessage, x pandastack.ExecRequest) {
	var spec ptySpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		newStream(w).end(connectErr("invalid_argument", "pty: %v", err))
		return
	}
	sess, err := s.terms.Start(r.Context(), c.sb.TeamID, c.sb.ID, func(ctx context.Context) (pandastack.Terminal, error) {
		return c.guest.Terminal(ctx, pandastack.TerminalRequest{Args: x.Args, Env: x.Env, Cwd: x.Cwd, User: x.User,
			Rows: spec.Size.Rows, Cols: spec.Size.Cols, TimeoutSeconds: x.TimeoutSeconds})
	})
	if err != nil {
		s.log.InfoContext(r.Context(), "e2b: start pty", "sandbox", c.sb.ID, "err", err)
		newStream(w).end(toRPCError(err))
		return
	}
	key := stdinKey(c.sb.ID, sess.PID())
	s.ptys.Store(key, sess)
	go func() {
		// Forgotten with the session: a grace period after its end.
		<-sess.Ended()
		time.AfterFunc(s.terms.Grace(), func() { s.ptys.CompareAndDelete(key, sess) })
	}()
	s.followPty(w, r, sess, sess.Attach(0))
}

// followPty streams a terminal session to one client: the start event,
// its output, its end. A client that goes away leaves the session to its
// grace period.
func (s *Server) followPty(w http.ResponseWriter, r *http.Request, sess *terminals.Session, at *terminals.Attachment) {
	defer at.Detach()
	st := newStream(w)
	stop := make(chan struct{})
	defer close(stop)
	go st.keepalive(r, eventMsg{processEvent{Keepalive: &struct{}{}}}, stop)
	if st.send(eventMsg{processEvent{Start: &startEvent{PID: sess.PID()}}}) != nil {
		return
	}
	for {
		b, _, err := at.Next(r.Context())
		if len(b) > 0 {
			if st.send(eventMsg{processEvent{Data: &dataEvent{Pty: b}}}) != nil {
				return
			}
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF):
			res, werr := at.Result()
			if werr != nil {
				st.end(toRPCError(werr))
				return
			}
			if st.send(eventMsg{processEvent{End: endOf(res)}}) == nil {
				st.end(nil)
			}
			return
		case terminals.IsDetached(err):
			st.end(nil) // another Connect follows it now
			return
		case r.Context().Err() != nil:
			return // the client went away
		default:
			st.end(toRPCError(err))
			return
		}
	}
}

// connectPty follows the pty process pid again (Process/Connect), if
// there is one; it reports whether there was.
func (s *Server) connectPty(w http.ResponseWriter, r *http.Request, c *sandboxCall, pid int) bool {
	v, ok := s.ptys.Load(stdinKey(c.sb.ID, pid))
	if !ok {
		return false
	}
	sess := v.(*terminals.Session)
	if _, err := s.terms.Get(c.sb.TeamID, c.sb.ID, sess.ID); err != nil {
		return false // its grace period ran out
	}
	s.followPty(w, r, sess, sess.AttachNew())
	return true
}

func (s *Server) ptyOf(c *sandboxCall, sel processSelector) (*terminals.Session, *rpcError) {
	pid, e := selectPID(sel)
	if e != nil {
		return nil, e
	}
	v, ok := s.ptys.Load(stdinKey(c.sb.ID, pid))
	if !ok {
		return nil, connectErr("not_found", "process %d has no pty (start it with pty)", pid)
	}
	return v.(*terminals.Session), nil
}

// ptyInput: SendInput with input.pty types into a process's terminal.
func (s *Server) ptyInput(w http.ResponseWriter, c *sandboxCall, sel processSelector, raw json.RawMessage) {
	var data []byte
	if err := json.Unmarshal(raw, &data); err != nil {
		writeConnectError(w, connectErr("invalid_argument", "input.pty must be base64 bytes: %v", err))
		return
	}
	sess, e := s.ptyOf(c, sel)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	select {
	case <-sess.Ended():
		writeConnectError(w, connectErr("failed_precondition", "the process has ended"))
		return
	default:
	}
	if err := sess.Input(data); err != nil {
		writeConnectError(w, connectErr("failed_precondition", "the process's terminal is closed"))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// processUpdate: process.Process/Update resizes a process's terminal (the
// SDK's pty.resize).
func (s *Server) processUpdate(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req struct {
		Process processSelector `json:"process"`
		PTY     *ptySpec        `json:"pty"`
	}
	if !unary(w, r, &req) {
		return
	}
	sess, e := s.ptyOf(c, req.Process)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	if req.PTY != nil {
		if err := sess.Resize(r.Context(), req.PTY.Size.Rows, req.PTY.Size.Cols); err != nil {
			writeConnectError(w, toRPCError(err))
			return
		}
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
