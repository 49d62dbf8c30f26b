// Package codeinterp speaks the protocol of the code-interpreter kernel baked
// into the code-interpreter template (internal/templates/kernel/kernel.py):
// one JSON request per connection to a guest loopback port, answered by JSON
// lines (stdout, stderr, rich results, an error, then end). It turns those
// lines into Events; the HTTP handlers in internal/api validate requests and
// write the events as JSON or NDJSON.
package codeinterp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// KernelPort is the guest loopback port the kernel listens on.
const KernelPort = 49999

// MaxCodeBytes bounds the code of one run.
const MaxCodeBytes = 4 << 20

// DefaultContext is the context a run without a context id uses.
const DefaultContext = "default"

var contextIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Dialer connects to a TCP port inside a sandbox (pandastack.Guest does).
type Dialer interface {
	DialPort(ctx context.Context, port int) (net.Conn, error)
}

// Request is one run: its JSON form is the body of POST /v1/sandboxes/{id}/code.
type Request struct {
	Code           string  `json:"code"`
	Language       string  `json:"language"`
	ContextID      string  `json:"context_id"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
	// Env is set in the kernel's environment for this run only (E2B's
	// per-run env_vars): the variables it names are put back after it.
	Env map[string]string `json:"env,omitempty"`
}

// maxRunEnv bounds a run's environment: its variables, and their bytes.
const (
	maxRunEnvVars  = 256
	maxRunEnvBytes = 256 << 10
)

// Validate checks a request; maxTimeoutSeconds bounds TimeoutSeconds (0
// means no timeout).
func (req Request) Validate(maxTimeoutSeconds float64) error {
	switch req.Language {
	case "", "python", "python3":
	default:
		return pandastack.Errorf(pandastack.EInvalid, "language %q is not supported (supported: python)", req.Language)
	}
	if len(req.Code) > MaxCodeBytes {
		return pandastack.Errorf(pandastack.ETooLarge, "code is %d bytes; the limit is %d MiB", len(req.Code), MaxCodeBytes>>20)
	}
	if req.ContextID != "" && !contextIDPattern.MatchString(req.ContextID) {
		return pandastack.Errorf(pandastack.EInvalid, "context_id must be 1-64 letters, digits, '_', '-' or '.', got %q", req.ContextID)
	}
	if len(req.Env) > maxRunEnvVars {
		return pandastack.Errorf(pandastack.EInvalid, "env has %d variables; the limit is %d", len(req.Env), maxRunEnvVars)
	}
	n := 0
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return pandastack.Errorf(pandastack.EInvalid, "env: %q is not a variable name (or its value holds a NUL byte)", k)
		}
		n += len(k) + len(v)
	}
	if n > maxRunEnvBytes {
		return pandastack.Errorf(pandastack.ETooLarge, "env is %d bytes; the limit is %d KiB", n, maxRunEnvBytes>>10)
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > maxTimeoutSeconds {
		return pandastack.Errorf(pandastack.EInvalid, "timeout_seconds must be between 0 (no timeout) and %g, got %g", maxTimeoutSeconds, req.TimeoutSeconds)
	}
	return nil
}

// Result is one rich output of a run: the value of the last expression or a
// plot. PNG is base64.
type Result struct {
	Text         string `json:"text,omitempty"`
	PNG          string `json:"png,omitempty"`
	HTML         string `json:"html,omitempty"`
	IsMainResult bool   `json:"is_main_result"`
}

// Error is an exception the code raised (or the timeout).
type Error struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"`
}

// Event is one line of a streamed run:
//
//	{"type":"stdout","text":"..."} / {"type":"stderr","text":"..."}
//	{"type":"result","result":{"text":"...","png":"<base64>"}}
//	{"type":"error","error":{"name":"ZeroDivisionError","value":"...","traceback":[...]}}
//	{"type":"end","execution_count":3,"timed_out":false}          always last
//
// If the kernel is lost mid-run the API's last line is instead
// {"type":"abort","abort":{"code":"...","message":"..."}}.
type Event struct {
	Type           string            `json:"type"`
	Text           string            `json:"text,omitempty"`
	Result         *Result           `json:"result,omitempty"`
	Error          *Error            `json:"error,omitempty"`
	ExecutionCount int               `json:"execution_count,omitempty"`
	TimedOut       bool              `json:"timed_out,omitempty"`
	Abort          *pandastack.Error `json:"abort,omitempty"`
}

// Context is one interpreter context (namespace) of a sandbox's kernel.
type Context struct {
	ID             string `json:"id"`
	ExecutionCount int    `json:"execution_count"`
	// Cwd is the directory its runs start in (a chdir in a run stays
	// with its context).
	Cwd string `json:"cwd,omitempty"`
}

// kernelEvent is a line from the kernel.
type kernelEvent struct {
	Type           string    `json:"type"`
	Text           string    `json:"text"`
	PNG            string    `json:"png"`
	HTML           string    `json:"html"`
	IsMainResult   bool      `json:"is_main_result"`
	Name           string    `json:"name"`
	Value          string    `json:"value"`
	Traceback      []string  `json:"traceback"`
	ExecutionCount int       `json:"execution_count"`
	TimedOut       bool      `json:"timed_out"`
	Contexts       []Context `json:"contexts"`
	ID             string    `json:"id"`
	Cwd            string    `json:"cwd"`
}

// dial connects to the sandbox's kernel and sends one request. The
// connection closes when ctx ends, which interrupts a run.
func dial(ctx context.Context, g Dialer, req any) (*bufio.Reader, func(), error) {
	conn, err := g.DialPort(ctx, KernelPort)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.ERefused {
			return nil, nil, &pandastack.Error{Code: pandastack.EConflict, Err: err,
				Message: "this sandbox has no code kernel running: run_code needs a sandbox from the code-interpreter template"}
		}
		return nil, nil, fmt.Errorf("connect to the code kernel: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	done := func() { stop(); conn.Close() }
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		done()
		return nil, nil, fmt.Errorf("send to the code kernel: %w", err)
	}
	return bufio.NewReaderSize(conn, 64<<10), done, nil
}

// MaxLine bounds one event line from the kernel (its output is
// guest-controlled): a longer line fails the run with EOutputTooLarge
// instead of growing the server's memory.
const MaxLine = 16 << 20

// read reads one event; io.EOF means the kernel closed the stream.
func read(r *bufio.Reader) (kernelEvent, error) {
	var ev kernelEvent
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > MaxLine {
			return ev, pandastack.Errorf(pandastack.EOutputTooLarge,
				"the code kernel sent an event line over %d MiB, so the run was stopped; print less at once, or write large data to a file and read the file", MaxLine>>20)
		}
		line = append(line, frag...)
		if err != bufio.ErrBufferFull {
			if err != nil {
				return ev, err
			}
			break
		}
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, fmt.Errorf("bad line from the code kernel: %w", err)
	}
	return ev, nil
}

// Run runs code in the sandbox's kernel, passing each event to fn; it
// returns once the end event has been passed. A sandbox without a kernel
// answers EConflict; a kernel lost mid-run EUnavailable.
func Run(ctx context.Context, g Dialer, req Request, fn func(Event) error) error {
	ctxID := req.ContextID
	if ctxID == "" {
		ctxID = DefaultContext
	}
	op := map[string]any{"op": "execute", "code": req.Code, "context": ctxID, "timeout": req.TimeoutSeconds}
	if len(req.Env) > 0 {
		op["env"] = req.Env
	}
	r, done, err := dial(ctx, g, op)
	if err != nil {
		return err
	}
	defer done()
	for {
		ev, err := read(r)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pandastack.ErrorCode(err) == pandastack.EOutputTooLarge {
				return err
			}
			return pandastack.Errorf(pandastack.EUnavailable, "the code kernel closed the connection before the run ended (%v)", err)
		}
		var out Event
		switch ev.Type {
		case "stdout", "stderr":
			out = Event{Type: ev.Type, Text: ev.Text}
		case "result":
			out = Event{Type: "result", Result: &Result{Text: ev.Text, PNG: ev.PNG, HTML: ev.HTML, IsMainResult: ev.IsMainResult}}
		case "error":
			if ev.Name == "ProtocolError" {
				return pandastack.Errorf(pandastack.EInvalid, "the code kernel refused the request: %s", ev.Value)
			}
			tb := ev.Traceback
			if tb == nil {
				tb = []string{}
			}
			out = Event{Type: "error", Error: &Error{Name: ev.Name, Value: ev.Value, Traceback: tb}}
		case "end":
			return fn(Event{Type: "end", ExecutionCount: ev.ExecutionCount, TimedOut: ev.TimedOut})
		default:
			continue
		}
		if err := fn(out); err != nil {
			return err
		}
	}
}

// Contexts lists the kernel's contexts; one appears when a run first names
// it. It gives the kernel 30 seconds to answer.
func Contexts(ctx context.Context, g Dialer) ([]Context, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rd, done, err := dial(ctx, g, map[string]any{"op": "contexts"})
	if err != nil {
		return nil, err
	}
	defer done()
	ev, err := read(rd)
	if err != nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "the code kernel did not answer (%v)", err)
	}
	if ev.Contexts == nil {
		ev.Contexts = []Context{}
	}
	return ev.Contexts, nil
}

// CreateContext makes context id, whose runs start in cwd ("": the
// kernel's own directory). A taken id is EConflict, a cwd that is not a
// directory EInvalid.
func CreateContext(ctx context.Context, g Dialer, id, cwd string) (Context, error) {
	if !contextIDPattern.MatchString(id) {
		return Context{}, pandastack.Errorf(pandastack.EInvalid, "context id must be 1-64 letters, digits, '_', '-' or '.', got %q", id)
	}
	ev, err := manage(ctx, g, map[string]any{"op": "create", "context": id, "cwd": cwd})
	if err != nil {
		return Context{}, err
	}
	return Context{ID: ev.ID, ExecutionCount: ev.ExecutionCount, Cwd: ev.Cwd}, nil
}

// RestartContext empties context id's namespace (its cwd stays); an
// unknown id is ENotFound.
func RestartContext(ctx context.Context, g Dialer, id string) error {
	_, err := manage(ctx, g, map[string]any{"op": "restart", "context": id})
	return err
}

// RemoveContext removes context id; an unknown id is ENotFound.
func RemoveContext(ctx context.Context, g Dialer, id string) error {
	_, err := manage(ctx, g, map[string]any{"op": "remove", "context": id})
	return err
}

// manage sends one context operation and maps the kernel's refusal onto
// an error code. It gives the kernel 30 seconds to answer.
func manage(ctx context.Context, g Dialer, req map[string]any) (kernelEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rd, done, err := dial(ctx, g, req)
	if err != nil {
		return kernelEvent{}, err
	}
	defer done()
	ev, err := read(rd)
	if err != nil {
		return ev, pandastack.Errorf(pandastack.EUnavailable, "the code kernel did not answer (%v)", err)
	}
	if ev.Type != "error" {
		return ev, nil
	}
	code := pandastack.EInvalid
	switch ev.Name {
	case "NotFound":
		code = pandastack.ENotFound
	case "FileExistsError":
		code = pandastack.EConflict
	case "ProtocolError":
		if strings.Contains(ev.Value, "unknown op") {
			code = pandastack.EConflict
			ev.Value = "this sandbox's code kernel predates context management: rebuild its template"
		}
	}
	return ev, pandastack.Errorf(code, "%s", ev.Value)
}
