package e2bcompat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/pandastack/pandastack"
)

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type processSelector struct {
	PID *uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

type startRequest struct {
	Process processConfig   `json:"process"`
	PTY     json.RawMessage `json:"pty"`
	Tag     *string         `json:"tag"`
	Stdin   *bool           `json:"stdin"`
}

// processEvent is process.ProcessEvent: exactly one member is set.
type processEvent struct {
	Start     *startEvent `json:"start,omitempty"`
	Data      *dataEvent  `json:"data,omitempty"`
	End       *endEvent   `json:"end,omitempty"`
	Keepalive *struct{}   `json:"keepalive,omitempty"`
}

type startEvent struct {
	PID int `json:"pid"`
}

type dataEvent struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	Pty    []byte `json:"pty,omitempty"`
}

type endEvent struct {
	ExitCode int    `json:"exitCode"`
	Exited   bool   `json:"exited"`
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
}

// eventMsg is StartResponse and ConnectResponse alike.
type eventMsg struct {
	Event processEvent `json:"event"`
}

// processStart: process.Process/Start (server-streaming). The command runs
// in the background on the guest and its output is followed from its
// start, so a client that goes away does not kill it (as with envd); the
// Connect-Timeout-Ms header bounds its life.
func (s *Server) processStart(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req startRequest
	if e := readEnvelope(r, &req); e != nil {
		newStream(w).end(e)
		return
	}
	switch {
	case req.Process.Cmd == "":
		newStream(w).end(connectErr("invalid_argument", "process.cmd is required"))
		return
	}
	user := rpcUser(r)
	x := pandastack.ExecRequest{Args: append([]string{req.Process.Cmd}, req.Process.Args...), Env: req.Process.Envs,
		User: user, TimeoutSeconds: connectTimeout(r), Background: true}
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		x.Cwd = resolvePath(*req.Process.Cwd, user)
	}
	if len(req.PTY) > 0 && string(req.PTY) != "null" {
		s.startPty(w, r, c, req.PTY, x)
		return
	}
	if req.Stdin != nil && *req.Stdin {
		s.startWithStdin(w, r, c, x)
		return
	}
	// Started in the background and followed on the same guest stream:
	// one round trip, and the process outlives a client that goes away.
	x.Follow = true
	s.streamExec(w, r, c, x, nil, nil, nil)
}

// streamExec runs x on the guest and streams it as envd's process events:
// the start (after onStart, given the pid), the output, then the end
// (after ran, called once the command is over).
func (s *Server) streamExec(w http.ResponseWriter, r *http.Request, c *sandboxCall, x pandastack.ExecRequest, stdin io.Reader, onStart func(pid int), ran func()) {
	var (
		st   *stream
		stop = make(chan struct{})
	)
	defer close(stop)
	res, err := c.guest.Exec(r.Context(), x, stdin, func(ev pandastack.ExecEvent) error {
		switch ev.Type {
		case "start":
			if onStart != nil {
				onStart(ev.PID)
			}
			st = newStream(w)
			go st.keepalive(r, eventMsg{processEvent{Keepalive: &struct{}{}}}, stop)
			return st.send(eventMsg{processEvent{Start: &startEvent{PID: ev.PID}}})
		case "stdout":
			return st.send(eventMsg{processEvent{Data: &dataEvent{Stdout: ev.Data}}})
		case "stderr":
			return st.send(eventMsg{processEvent{Data: &dataEvent{Stderr: ev.Data}}})
		}
		return nil
	})
	if ran != nil {
		ran()
	}
	if st == nil {
		if err == nil {
			err = errors.New("the guest reported no start")
		}
		s.log.InfoContext(r.Context(), "e2b: start process", "sandbox", c.sb.ID, "err", err)
		newStream(w).end(toRPCError(err))
		return
	}
	if err != nil {
		if r.Context().Err() == nil {
			st.end(toRPCError(err))
		}
		return
	}
	if st.send(eventMsg{processEvent{End: endOf(res)}}) == nil {
		st.end(nil)
	}
}

// startWithStdin runs a command whose stdin stays open for SendInput and
// CloseStdin. Unlike other commands it runs in the foreground of this
// stream: the guest keeps no stdin for background processes, so a client
// that goes away ends it.
func (s *Server) startWithStdin(w http.ResponseWriter, r *http.Request, c *sandboxCall, x pandastack.ExecRequest) {
	x.Background = false
	pr, pw := io.Pipe()
	defer pw.Close()
	var key string
	s.streamExec(w, r, c, x, pr, func(pid int) {
		key = stdinKey(c.sb.ID, pid)
		s.stdins.Store(key, pw)
	}, func() {
		if key != "" {
			s.stdins.Delete(key)
		}
	})
}

func stdinKey(sandbox string, pid int) string { return sandbox + "/" + strconv.Itoa(pid) }

type inputRequest struct {
	Process processSelector `json:"process"`
	Input   struct {
		Stdin []byte          `json:"stdin"`
		PTY   json.RawMessage `json:"pty"`
	} `json:"input"`
}

// processSendInput: process.Process/SendInput writes to the stdin of a
// process started with stdin: true.
func (s *Server) processSendInput(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req inputRequest
	if !unary(w, r, &req) {
		return
	}
	if len(req.Input.PTY) > 0 && string(req.Input.PTY) != "null" {
		s.ptyInput(w, c, req.Process, req.Input.PTY)
		return
	}
	pw, e := s.stdinOf(c, req.Process)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	if _, err := pw.Write(req.Input.Stdin); err != nil {
		writeConnectError(w, connectErr("failed_precondition", "stdin of the process is closed"))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// processCloseStdin: process.Process/CloseStdin sends end-of-file.
func (s *Server) processCloseStdin(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req connectRequest
	if !unary(w, r, &req) {
		return
	}
	pw, e := s.stdinOf(c, req.Process)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	pw.Close()
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) stdinOf(c *sandboxCall, sel processSelector) (*io.PipeWriter, *rpcError) {
	pid, e := selectPID(sel)
	if e != nil {
		return nil, e
	}
	v, ok := s.stdins.Load(stdinKey(c.sb.ID, pid))
	if !ok {
		return nil, connectErr("not_found", "process %d has no open stdin (start it with stdin: true)", pid)
	}
	return v.(*io.PipeWriter), nil
}

type connectRequest struct {
	Process processSelector `json:"process"`
}

// processConnect: process.Process/Connect (server-streaming) follows a
// process started earlier, from its start (output kept by the guest).
func (s *Server) processConnect(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req connectRequest
	if e := readEnvelope(r, &req); e != nil {
		newStream(w).end(e)
		return
	}
	pid, e := selectPID(req.Process)
	if e != nil {
		newStream(w).end(e)
		return
	}
	if s.connectPty(w, r, c, pid) {
		return
	}
	s.follow(w, r, c, pid)
}

// follow streams process pid: start, its output, its end. The start is
// sent once the guest has found the process: a pid it does not know ends
// the stream with not_found, as envd answers.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, c *sandboxCall, pid int) {
	var st *stream
	stop := make(chan struct{})
	defer close(stop)
	res, err := c.guest.Attach(r.Context(), pid, func(ev pandastack.ExecEvent) error {
		switch ev.Type {
		case "start":
			st = newStream(w)
			go st.keepalive(r, eventMsg{processEvent{Keepalive: &struct{}{}}}, stop)
			return st.send(eventMsg{processEvent{Start: &startEvent{PID: pid}}})
		case "stdout":
			return st.send(eventMsg{processEvent{Data: &dataEvent{Stdout: ev.Data}}})
		case "stderr":
			return st.send(eventMsg{processEvent{Data: &dataEvent{Stderr: ev.Data}}})
		}
		return nil
	})
	if st == nil {
		if err == nil {
			err = errors.New("the guest reported no start")
		}
		newStream(w).end(toRPCError(fmt.Errorf("follow process %d: %w", pid, err)))
		return
	}
	if err != nil {
		if r.Context().Err() == nil {
			st.end(toRPCError(fmt.Errorf("follow process %d: %w", pid, err)))
		}
		return
	}
	if st.send(eventMsg{processEvent{End: endOf(res)}}) == nil {
		st.end(nil)
	}
}

// endOf is envd's end event for how a command ended: a signal-killed (or
// timed-out) process has exit code -1, as Go reports it.
func endOf(res pandastack.ExecResult) *endEvent {
	e := &endEvent{ExitCode: res.ExitCode, Exited: true, Status: "exit status " + strconv.Itoa(res.ExitCode)}
	if res.Signal != "" {
		sig := strings.ToLower(strings.TrimPrefix(strings.ToUpper(res.Signal), "SIG"))
		if sig == "kill" {
			sig = "killed"
		}
		e.ExitCode, e.Exited, e.Status = -1, false, "signal: "+sig
	}
	if res.TimedOut && res.Signal == "" {
		e.ExitCode, e.Exited, e.Status = -1, false, "signal: killed"
	}
	if e.ExitCode != 0 {
		e.Error = e.Status
	}
	return e
}

func selectPID(sel processSelector) (int, *rpcError) {
	if sel.PID == nil {
		if sel.Tag != nil {
			return 0, connectErr("unimplemented", "selecting a process by tag is not implemented by PandaStack's E2B compatibility yet")
		}
		return 0, connectErr("invalid_argument", "process.pid is required")
	}
	return int(*sel.PID), nil
}

type processInfo struct {
	Config processConfig `json:"config"`
	PID    int           `json:"pid"`
}

// processList: process.Process/List → the running processes.
func (s *Server) processList(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req struct{}
	if e := readUnary(r, &req); e != nil {
		writeConnectError(w, e)
		return
	}
	ps, err := c.guest.Processes(r.Context())
	if err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	out := struct {
		Processes []processInfo `json:"processes"`
	}{Processes: []processInfo{}}
	for _, p := range ps {
		if !p.Running {
			continue
		}
		cfg := processConfig{Cmd: "/bin/sh", Args: []string{"-c", p.Cmd}, Envs: map[string]string{}}
		if len(p.Args) > 0 {
			cfg.Cmd, cfg.Args = p.Args[0], p.Args[1:]
		}
		out.Processes = append(out.Processes, processInfo{Config: cfg, PID: p.PID})
	}
	writeJSON(w, http.StatusOK, out)
}

type signalRequest struct {
	Process processSelector `json:"process"`
	Signal  json.RawMessage `json:"signal"`
}

// processSignal: process.Process/SendSignal (SIGKILL or SIGTERM, by enum
// name or number).
func (s *Server) processSignal(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req signalRequest
	if e := readUnary(r, &req); e != nil {
		writeConnectError(w, e)
		return
	}
	pid, e := selectPID(req.Process)
	if e != nil {
		writeConnectError(w, e)
		return
	}
	var sig string
	switch strings.Trim(string(req.Signal), `"`) {
	case "SIGNAL_SIGKILL", "9":
		sig = "KILL"
	case "SIGNAL_SIGTERM", "15":
		sig = "TERM"
	default:
		writeConnectError(w, connectErr("invalid_argument", "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM, got %s", req.Signal))
		return
	}
	if err := c.guest.Signal(r.Context(), pid, sig); err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
