package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/pandastack/pandastack"
)

// ptySpec is process.PTY: {"size":{"cols","rows"}}.
type ptySpec struct {
	Size struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	} `json:"size"`
}

// startPty: process.Process/Start with a pty (the SDK's pty.create). The
// command runs on a guest pseudo-terminal in the foreground of this
// stream: its output is data.pty events, SendInput with input.pty types
// into it, Update resizes it, SendSignal reaches it by pid. The client
// going away (or the Connect-Timeout-Ms deadline) ends it.
func (s *Server) startPty(w http.ResponseWriter, r *http.Request, c *sandboxCall, raw json.RawMessage, x pandastack.ExecRequest) {
	var spec ptySpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		newStream(w).end(connectErr("invalid_argument", "pty: %v", err))
		return
	}
	term, err := c.guest.Terminal(r.Context(), pandastack.TerminalRequest{Args: x.Args, Env: x.Env, Cwd: x.Cwd, User: x.User,
		Rows: spec.Size.Rows, Cols: spec.Size.Cols, TimeoutSeconds: x.TimeoutSeconds})
	if err != nil {
		s.log.InfoContext(r.Context(), "e2b: start pty", "sandbox", c.sb.ID, "err", err)
		newStream(w).end(toRPCError(err))
		return
	}
	defer term.Close()
	stopKill := context.AfterFunc(r.Context(), func() { term.Close() })
	defer stopKill()
	key := stdinKey(c.sb.ID, term.PID())
	s.ptys.Store(key, term)
	defer s.ptys.Delete(key)
	st := newStream(w)
	stop := make(chan struct{})
	defer close(stop)
	go st.keepalive(r, eventMsg{processEvent{Keepalive: &struct{}{}}}, stop)
	if st.send(eventMsg{processEvent{Start: &startEvent{PID: term.PID()}}}) != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := term.Read(buf)
		if n > 0 {
			if st.send(eventMsg{processEvent{Data: &dataEvent{Pty: append([]byte(nil), buf[:n]...)}}}) != nil {
				return
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if r.Context().Err() == nil {
				st.end(toRPCError(err))
			}
			return
		}
	}
	res, err := term.Wait()
	if err != nil {
		st.end(toRPCError(err))
		return
	}
	if st.send(eventMsg{processEvent{End: endOf(res)}}) == nil {
		st.end(nil)
	}
}

func (s *Server) ptyOf(c *sandboxCall, sel processSelector) (pandastack.Terminal, *rpcError) {
	pid, e := selectPID(sel)
	if e != nil {
		return nil, e
	}
	v, ok := s.ptys.Load(stdinKey(c.sb.ID, pid))
	if !ok {
		return nil, connectErr("not_found", "process %d has no pty (start it with pty)", pid)
	}
	return v.(pandastack.Terminal), nil
}

// ptyInput: SendInput with input.pty types into a process's terminal.
func (s *Server) ptyInput(w http.ResponseWriter, c *sandboxCall, sel processSelector, raw json.RawMessage) {
	var data []byte
	if err := json.Unmarshal(raw, &data); err != nil {
		writeConnectError(w, connectErr("invalid_argument", "input.pty must be base64 bytes: %v", err))
		return
	}
	term, e := s.ptyOf(c, sel)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	if _, err := term.Write(data); err != nil {
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
	term, e := s.ptyOf(c, req.Process)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	if req.PTY != nil {
		if err := term.Resize(r.Context(), req.PTY.Size.Rows, req.PTY.Size.Cols); err != nil {
			writeConnectError(w, toRPCError(err))
			return
		}
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
