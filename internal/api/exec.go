package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/pandastack/pandastack"
)

// maxExecTimeoutSeconds bounds timeout_seconds (24h).
const maxExecTimeoutSeconds = 24 * 60 * 60

type execRequest struct {
	Cmd            string            `json:"cmd"`
	Args           []string          `json:"args"`
	Env            map[string]string `json:"env"`
	Cwd            string            `json:"cwd"`
	User           string            `json:"user"`
	TimeoutSeconds float64           `json:"timeout_seconds"`
	Stdin          *string           `json:"stdin"`
	StdinBase64    *string           `json:"stdin_base64"`
	Background     bool              `json:"background"`
}

// execResponse is the answer of a buffered exec.
type execResponse struct {
	PID            int     `json:"pid"`
	Stdout         string  `json:"stdout"`
	Stderr         string  `json:"stderr"`
	StdoutEncoding string  `json:"stdout_encoding"`
	StderrEncoding string  `json:"stderr_encoding"`
	ExitCode       int     `json:"exit_code"`
	Signal         string  `json:"signal"`
	TimedOut       bool    `json:"timed_out"`
	DurationMs     float64 `json:"duration_ms"`
}

type pidResponse struct {
	PID int `json:"pid"`
}

type processList struct {
	Processes []pandastack.Process `json:"processes"`
}

type signalRequest struct {
	Signal string `json:"signal"`
}

// toExec validates an exec request and returns what the guest needs.
func (req execRequest) toExec() (pandastack.ExecRequest, io.Reader, error) {
	var x pandastack.ExecRequest
	switch {
	case req.Cmd != "" && len(req.Args) > 0:
		return x, nil, invalid("give either cmd or args, not both")
	case req.Cmd == "" && len(req.Args) == 0:
		return x, nil, invalid("cmd or args is required")
	case len(req.Args) > 0 && req.Args[0] == "":
		return x, nil, invalid("args[0] (the program) must not be empty")
	}
	if err := checkEnv(req.Env); err != nil {
		return x, nil, err
	}
	if req.Cwd != "" {
		if _, err := absPath("cwd", req.Cwd); err != nil {
			return x, nil, err
		}
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > maxExecTimeoutSeconds {
		return x, nil, invalid("timeout_seconds must be between 0 (no timeout) and %d, got %g", maxExecTimeoutSeconds, req.TimeoutSeconds)
	}
	var stdin io.Reader
	switch {
	case req.Stdin != nil && req.StdinBase64 != nil:
		return x, nil, invalid("give either stdin or stdin_base64, not both")
	case req.Stdin != nil:
		stdin = strings.NewReader(*req.Stdin)
	case req.StdinBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*req.StdinBase64)
		if err != nil {
			return x, nil, invalid("stdin_base64 is not valid base64: %v", err)
		}
		stdin = bytes.NewReader(b)
	}
	x = pandastack.ExecRequest{
		Cmd:            req.Cmd,
		Args:           req.Args,
		Env:            req.Env,
		Cwd:            req.Cwd,
		User:           req.User,
		TimeoutSeconds: req.TimeoutSeconds,
		Background:     req.Background,
	}
	return x, stdin, nil
}

// wantsNDJSON reports whether the client asked for a streamed answer.
func wantsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, NDJSONType) {
			return true
		}
	}
	return false
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	var body execRequest
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	req, stdin, err := body.toExec()
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	switch {
	case req.Background:
		return s.execBackground(w, r, g, req, stdin)
	case wantsNDJSON(r):
		return s.stream(w, r, func(fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
			return g.Exec(r.Context(), req, stdin, fn)
		})
	}
	return s.execBuffered(w, r, g, req, stdin)
}

func (s *Server) execBackground(w http.ResponseWriter, r *http.Request, g pandastack.Guest, req pandastack.ExecRequest, stdin io.Reader) error {
	pid := 0
	_, err := g.Exec(r.Context(), req, stdin, func(ev pandastack.ExecEvent) error {
		if ev.Type == "start" {
			pid = ev.PID
		}
		return nil
	})
	if err != nil {
		return wrap(err, "start background command")
	}
	if pid == 0 {
		return errors.New("start background command: the guest reported no pid")
	}
	writeJSON(w, http.StatusAccepted, pidResponse{PID: pid})
	return nil
}

// errOutputLimit stops a buffered exec whose output outgrew the limit.
var errOutputLimit = errors.New("output limit reached")

func (s *Server) execBuffered(w http.ResponseWriter, r *http.Request, g pandastack.Guest, req pandastack.ExecRequest, stdin io.Reader) error {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var (
		mu             sync.Mutex
		pid            int
		stdout, stderr bytes.Buffer
		overflow       string
		held           int64 // of s.buffered
		busy           bool  // the server-wide budget ran out
	)
	defer func() { s.buffered.give(held) }()
	limit := s.cfg.MaxBufferedOutput
	res, err := g.Exec(ctx, req, stdin, func(ev pandastack.ExecEvent) error {
		mu.Lock()
		defer mu.Unlock()
		if overflow != "" || busy {
			return errOutputLimit
		}
		var buf *bytes.Buffer
		switch ev.Type {
		case "start":
			pid = ev.PID
			return nil
		case "stdout":
			buf = &stdout
		case "stderr":
			buf = &stderr
		default:
			return nil
		}
		if int64(buf.Len())+int64(len(ev.Data)) > limit {
			overflow = ev.Type
			cancel() // the engine kills the command
			return errOutputLimit
		}
		if !s.buffered.take(int64(len(ev.Data))) {
			busy = true
			cancel()
			return errOutputLimit
		}
		held += int64(len(ev.Data))
		buf.Write(ev.Data)
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if busy {
		return pandastack.Errorf(pandastack.EUnavailable,
			"the server is holding its limit of %s of buffered exec output for requests in flight, so the command was stopped; stream the output instead (send Accept: %s) or retry later",
			formatBytes(s.cfg.MaxBufferedTotal), NDJSONType)
	}
	if overflow != "" {
		return pandastack.Errorf(pandastack.EOutputTooLarge,
			"%s exceeded %s, so the command was stopped; stream the output instead (send Accept: %s) or redirect it to a file and read the file",
			overflow, formatBytes(limit), NDJSONType)
	}
	if err != nil {
		return wrap(err, "exec")
	}
	out := execResponse{
		PID:        pid,
		ExitCode:   res.ExitCode,
		Signal:     res.Signal,
		TimedOut:   res.TimedOut,
		DurationMs: res.DurationMs,
	}
	writeExecResponse(w, out, stdout.Bytes(), stderr.Bytes())
	return nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// stream runs an exec or attach and writes its events as NDJSON:
//
//	{"type":"start","pid":N}
//	{"type":"stdout","data":"<base64>"}   (any number, interleaved with stderr)
//	{"type":"stderr","data":"<base64>"}
//	{"type":"exit","result":{"exit_code":0,"timed_out":false,"duration_ms":1.5}}
//	  or {"type":"error","error":{"code":"...","message":"..."}}
//
// exit or error is always the last line. If the operation fails before any
// event, the answer is an ordinary JSON error with its status instead.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, run func(fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error)) error {
	out := newNDJSON(w)
	var reported error // an "error" event the engine delivered through fn
	res, err := run(func(ev pandastack.ExecEvent) error {
		switch ev.Type {
		case "start":
			return out.Send(pandastack.ExecEvent{Type: "start", PID: ev.PID})
		case "stdout", "stderr":
			if len(ev.Data) == 0 {
				return nil
			}
			return out.Send(pandastack.ExecEvent{Type: ev.Type, Data: ev.Data})
		case "error":
			if ev.Error != nil {
				reported = ev.Error
			}
		}
		// "exit" and "error" are written below from what run returns, so
		// the stream ends with exactly one of them.
		return nil
	})
	if err == nil && reported != nil {
		err = reported
	}
	if err != nil {
		if !out.Started() {
			return err
		}
		out.Send(pandastack.ExecEvent{Type: "error", Error: s.wireError(r, err)})
		return nil
	}
	out.Send(pandastack.ExecEvent{Type: "exit", Result: &res})
	return nil
}

func (s *Server) processes(w http.ResponseWriter, r *http.Request) error {
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	ps, err := g.Processes(r.Context())
	if err != nil {
		return wrap(err, "list processes")
	}
	if ps == nil {
		ps = []pandastack.Process{}
	}
	for i := range ps {
		if ps[i].Args == nil {
			ps[i].Args = []string{}
		}
	}
	writeJSON(w, http.StatusOK, processList{Processes: ps})
	return nil
}

func pathPID(r *http.Request) (int, error) {
	s := r.PathValue("pid")
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, invalid("pid must be a positive integer, got %q", s)
	}
	return pid, nil
}

// attach streams the output of a running (typically background) process
// as NDJSON, whatever the Accept header says.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	return s.stream(w, r, func(fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		return g.Attach(r.Context(), pid, fn)
	})
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request) error {
	pid, err := pathPID(r)
	if err != nil {
		return err
	}
	var req signalRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	sig, err := SignalName(req.Signal)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	if err := g.Signal(r.Context(), pid, sig); err != nil {
		return wrap(err, fmt.Sprintf("send %s to pid %d", sig, pid))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// signals are the signals a client may send, by number.
var signals = map[int]string{
	1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 6: "SIGABRT", 9: "SIGKILL",
	10: "SIGUSR1", 12: "SIGUSR2", 14: "SIGALRM", 15: "SIGTERM",
	18: "SIGCONT", 19: "SIGSTOP", 20: "SIGTSTP", 28: "SIGWINCH",
}

// SignalName returns the canonical name ("SIGTERM") of a signal given as
// "SIGTERM", "TERM" or "15" (any case). This is the form the Guest receives.
func SignalName(s string) (string, error) {
	in := strings.ToUpper(strings.TrimSpace(s))
	if in == "" {
		return "", invalid("signal is required (e.g. SIGTERM, TERM or 15)")
	}
	if n, err := strconv.Atoi(in); err == nil {
		if name, ok := signals[n]; ok {
			return name, nil
		}
		return "", invalid("unsupported signal number %d", n)
	}
	if !strings.HasPrefix(in, "SIG") {
		in = "SIG" + in
	}
	for _, name := range signals {
		if name == in {
			return name, nil
		}
	}
	return "", invalid("unknown signal %q (e.g. SIGTERM, TERM or 15)", s)
}
