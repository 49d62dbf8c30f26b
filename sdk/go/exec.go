package pandastack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ExecOptions adjust a command.
type ExecOptions struct {
	// Args, when set, runs a program without a shell: the argv is cmd
	// followed by Args (or just Args when cmd is ""). Without Args, cmd is
	// run with bash -c (/bin/sh -c in an image without bash).
	Args           []string
	Env            map[string]string
	Cwd            string  // absolute
	User           string  // default: the template's user
	TimeoutSeconds float64 // 0: no timeout. A timeout is not an error: see ExecResult.TimedOut.
	Stdin          []byte  // standard input (at most about 700 KiB)

	// OnStdout and OnStderr receive output as it is produced. The slice is
	// only valid during the call.
	OnStdout func([]byte)
	OnStderr func([]byte)
	// DiscardOutput leaves ExecResult.Stdout and Stderr empty (the
	// callbacks still fire): for output too large to keep in memory.
	DiscardOutput bool
}

// AttachOptions adjust Attach.
type AttachOptions struct {
	OnStdout      func([]byte)
	OnStderr      func([]byte)
	DiscardOutput bool
}

// ExecResult is how a command ended and what it printed.
type ExecResult struct {
	PID        int
	Stdout     []byte
	Stderr     []byte
	ExitCode   int
	Signal     string // the signal that ended it, if any (e.g. SIGKILL)
	TimedOut   bool   // killed by TimeoutSeconds (ExitCode is then 137)
	DurationMs float64
}

type execBody struct {
	Cmd            string            `json:"cmd,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	User           string            `json:"user,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	StdinBase64    *string           `json:"stdin_base64,omitempty"`
	Background     bool              `json:"background,omitempty"`
}

func newExecBody(cmd string, o ExecOptions) execBody {
	b := execBody{Cmd: cmd, Env: o.Env, Cwd: o.Cwd, User: o.User, TimeoutSeconds: o.TimeoutSeconds}
	if len(o.Args) > 0 {
		b.Cmd = ""
		if cmd != "" {
			b.Args = append([]string{cmd}, o.Args...)
		} else {
			b.Args = o.Args
		}
	}
	if o.Stdin != nil {
		s := base64.StdEncoding.EncodeToString(o.Stdin)
		b.StdinBase64 = &s
	}
	return b
}

// Exec runs a command and waits for it to end. Output streams to the
// OnStdout/OnStderr callbacks as it is produced and is collected in the
// result. A non-zero exit code or a timeout is not an error; err is set
// only if the command could not be run or followed (canceling ctx kills it).
func (s *Sandbox) Exec(ctx context.Context, cmd string, opts ExecOptions) (*ExecResult, error) {
	resp, err := s.c.send(ctx, request{method: "POST", path: s.path("/exec"), body: newExecBody(cmd, opts), accept: ndjsonType})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readStream(resp.Body, resp.Header.Get("X-Request-Id"), opts.OnStdout, opts.OnStderr, opts.DiscardOutput)
}

// StartBackground starts a command that keeps running after the call
// returns, and returns its pid. Follow it with Attach; stop it with Signal.
// The output callbacks in opts are not used.
func (s *Sandbox) StartBackground(ctx context.Context, cmd string, opts ExecOptions) (int, error) {
	body := newExecBody(cmd, opts)
	body.Background = true
	var out struct {
		PID int `json:"pid"`
	}
	if err := s.c.do(ctx, request{method: "POST", path: s.path("/exec"), body: body}, &out); err != nil {
		return 0, err
	}
	return out.PID, nil
}

// Attach follows a running process's output until it exits. Canceling ctx
// detaches without killing the process.
func (s *Sandbox) Attach(ctx context.Context, pid int, opts AttachOptions) (*ExecResult, error) {
	resp, err := s.c.send(ctx, request{method: "GET", path: s.path("/processes/" + strconv.Itoa(pid) + "/stream"), accept: ndjsonType})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readStream(resp.Body, resp.Header.Get("X-Request-Id"), opts.OnStdout, opts.OnStderr, opts.DiscardOutput)
}

// Signal sends a signal ("SIGTERM", "TERM", "15", "KILL", ...) to a process.
func (s *Sandbox) Signal(ctx context.Context, pid int, signal string) error {
	body := struct {
		Signal string `json:"signal"`
	}{signal}
	return s.c.do(ctx, request{method: "POST", path: s.path("/processes/" + strconv.Itoa(pid) + "/signal"), body: body}, nil)
}

// streamEvent is one NDJSON line of a command stream.
type streamEvent struct {
	Type   string `json:"type"`
	PID    int    `json:"pid"`
	Data   []byte `json:"data"`
	Result *struct {
		ExitCode   int     `json:"exit_code"`
		Signal     string  `json:"signal"`
		TimedOut   bool    `json:"timed_out"`
		DurationMs float64 `json:"duration_ms"`
	} `json:"result"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readStream consumes a command stream up to its exit or error line.
func readStream(r io.Reader, requestID string, onStdout, onStderr func([]byte), discard bool) (*ExecResult, error) {
	res := &ExecResult{}
	dec := json.NewDecoder(r)
	for {
		var ev streamEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return res, fmt.Errorf("pandastack: command stream ended before the command did: %w", err)
		}
		switch ev.Type {
		case "start":
			res.PID = ev.PID
		case "stdout":
			if !discard {
				res.Stdout = append(res.Stdout, ev.Data...)
			}
			if onStdout != nil {
				onStdout(ev.Data)
			}
		case "stderr":
			if !discard {
				res.Stderr = append(res.Stderr, ev.Data...)
			}
			if onStderr != nil {
				onStderr(ev.Data)
			}
		case "exit":
			if ev.Result != nil {
				res.ExitCode = ev.Result.ExitCode
				res.Signal = ev.Result.Signal
				res.TimedOut = ev.Result.TimedOut
				res.DurationMs = ev.Result.DurationMs
			}
			return res, nil
		case "error":
			e := &APIError{Code: ErrInternal.Code, Message: "unknown error", RequestID: requestID}
			if ev.Error != nil {
				e.Code, e.Message = ev.Error.Code, ev.Error.Message
			}
			return res, e
		}
	}
}
