package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/pandastack/pandastack"
)

// CodeKernelPort is the guest loopback port of the code kernel baked into
// the code-interpreter template (internal/templates/kernel/kernel.py).
const CodeKernelPort = 49999

// maxCodeBytes bounds the code of one run.
const maxCodeBytes = 4 << 20

var contextIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

type codeRequest struct {
	Code           string  `json:"code"`
	Language       string  `json:"language"`
	ContextID      string  `json:"context_id"`
	TimeoutSeconds float64 `json:"timeout_seconds"`
}

// CodeResult is one rich output of a run: the value of the last expression
// or a plot. PNG is base64.
type CodeResult struct {
	Text         string `json:"text,omitempty"`
	PNG          string `json:"png,omitempty"`
	HTML         string `json:"html,omitempty"`
	IsMainResult bool   `json:"is_main_result"`
}

// CodeError is an exception the code raised (or the timeout).
type CodeError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"`
}

// CodeEvent is one line of a streamed run_code:
//
//	{"type":"stdout","text":"..."} / {"type":"stderr","text":"..."}
//	{"type":"result","result":{"text":"...","png":"<base64>"}}
//	{"type":"error","error":{"name":"ZeroDivisionError","value":"...","traceback":[...]}}
//	{"type":"end","execution_count":3,"timed_out":false}          always last
//
// If the kernel is lost mid-run the last line is instead
// {"type":"abort","abort":{"code":"...","message":"..."}}.
type CodeEvent struct {
	Type           string            `json:"type"`
	Text           string            `json:"text,omitempty"`
	Result         *CodeResult       `json:"result,omitempty"`
	Error          *CodeError        `json:"error,omitempty"`
	ExecutionCount int               `json:"execution_count,omitempty"`
	TimedOut       bool              `json:"timed_out,omitempty"`
	Abort          *pandastack.Error `json:"abort,omitempty"`
}

// codeResponse is the answer of a buffered run_code.
type codeResponse struct {
	Stdout         []string     `json:"stdout"`
	Stderr         []string     `json:"stderr"`
	Results        []CodeResult `json:"results"`
	Error          *CodeError   `json:"error"`
	ExecutionCount int          `json:"execution_count"`
	TimedOut       bool         `json:"timed_out"`
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
	Contexts       []CodeCtx `json:"contexts"`
}

// CodeCtx is one interpreter context of a sandbox's kernel.
type CodeCtx struct {
	ID             string `json:"id"`
	ExecutionCount int    `json:"execution_count"`
}

func (req codeRequest) validate() error {
	switch req.Language {
	case "", "python", "python3":
	default:
		return invalid("language %q is not supported (supported: python)", req.Language)
	}
	if len(req.Code) > maxCodeBytes {
		return pandastack.Errorf(pandastack.ETooLarge, "code is %d bytes; the limit is %s", len(req.Code), formatBytes(maxCodeBytes))
	}
	if req.ContextID != "" && !contextIDPattern.MatchString(req.ContextID) {
		return invalid("context_id must be 1-64 letters, digits, '_', '-' or '.', got %q", req.ContextID)
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > maxExecTimeoutSeconds {
		return invalid("timeout_seconds must be between 0 (no timeout) and %d, got %g", maxExecTimeoutSeconds, req.TimeoutSeconds)
	}
	return nil
}

// dialKernel connects to the sandbox's code kernel and sends one request.
// The connection closes when ctx ends, which interrupts a run.
func dialKernel(ctx context.Context, g pandastack.Guest, req any) (*bufio.Reader, func(), error) {
	conn, err := g.DialPort(ctx, CodeKernelPort)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.ERefused {
			return nil, nil, &pandastack.Error{Code: pandastack.EConflict, Err: err,
				Message: "this sandbox has no code kernel running: run_code needs a sandbox from the code-interpreter template"}
		}
		return nil, nil, wrap(err, "connect to the code kernel")
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	done := func() { stop(); conn.Close() }
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append(b, '\n')); err != nil {
		done()
		return nil, nil, wrap(err, "send to the code kernel")
	}
	return bufio.NewReaderSize(conn, 64<<10), done, nil
}

// maxKernelLine bounds one event line from the code kernel (its output is
// guest-controlled): a longer line fails the request instead of growing
// the server's memory.
const maxKernelLine = 16 << 20

// readKernel reads one event; io.EOF means the kernel closed the stream.
func readKernel(r *bufio.Reader) (kernelEvent, error) {
	var ev kernelEvent
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(line)+len(frag) > maxKernelLine {
			return ev, pandastack.Errorf(pandastack.EOutputTooLarge,
				"the code kernel sent an event line over %s, so the run was stopped; print less at once, or write large data to a file and read the file", formatBytes(maxKernelLine))
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

// runCode runs code in the sandbox's kernel, passing each event to fn; it
// returns once the end event has been passed.
func runCode(ctx context.Context, g pandastack.Guest, req codeRequest, fn func(CodeEvent) error) error {
	ctxID := req.ContextID
	if ctxID == "" {
		ctxID = "default"
	}
	r, done, err := dialKernel(ctx, g, map[string]any{"op": "execute", "code": req.Code, "context": ctxID, "timeout": req.TimeoutSeconds})
	if err != nil {
		return err
	}
	defer done()
	for {
		ev, err := readKernel(r)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if pandastack.ErrorCode(err) == pandastack.EOutputTooLarge {
				return err
			}
			return pandastack.Errorf(pandastack.EUnavailable, "the code kernel closed the connection before the run ended (%v)", err)
		}
		var out CodeEvent
		switch ev.Type {
		case "stdout", "stderr":
			out = CodeEvent{Type: ev.Type, Text: ev.Text}
		case "result":
			out = CodeEvent{Type: "result", Result: &CodeResult{Text: ev.Text, PNG: ev.PNG, HTML: ev.HTML, IsMainResult: ev.IsMainResult}}
		case "error":
			if ev.Name == "ProtocolError" {
				return pandastack.Errorf(pandastack.EInvalid, "the code kernel refused the request: %s", ev.Value)
			}
			tb := ev.Traceback
			if tb == nil {
				tb = []string{}
			}
			out = CodeEvent{Type: "error", Error: &CodeError{Name: ev.Name, Value: ev.Value, Traceback: tb}}
		case "end":
			return fn(CodeEvent{Type: "end", ExecutionCount: ev.ExecutionCount, TimedOut: ev.TimedOut})
		default:
			continue
		}
		if err := fn(out); err != nil {
			return err
		}
	}
}

func (s *Server) runCode(w http.ResponseWriter, r *http.Request) error {
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	var body codeRequest
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	if err := body.validate(); err != nil {
		return err
	}
	if wantsNDJSON(r) {
		out := newNDJSON(w)
		err := runCode(r.Context(), g, body, func(ev CodeEvent) error { return out.Send(ev) })
		if err != nil {
			if !out.Started() {
				return err
			}
			if !errors.Is(err, context.Canceled) {
				out.Send(CodeEvent{Type: "abort", Abort: s.wireError(r, err)})
			}
		}
		return nil
	}
	res := codeResponse{Stdout: []string{}, Stderr: []string{}, Results: []CodeResult{}}
	var size int64
	err = runCode(r.Context(), g, body, func(ev CodeEvent) error {
		size += int64(len(ev.Text))
		if ev.Result != nil {
			size += int64(len(ev.Result.Text) + len(ev.Result.PNG) + len(ev.Result.HTML))
		}
		if size > s.cfg.MaxBufferedOutput {
			return pandastack.Errorf(pandastack.EOutputTooLarge, "the run's output exceeded %s, so it was interrupted; stream it instead (send Accept: %s)",
				formatBytes(s.cfg.MaxBufferedOutput), NDJSONType)
		}
		switch ev.Type {
		case "stdout":
			res.Stdout = append(res.Stdout, ev.Text)
		case "stderr":
			res.Stderr = append(res.Stderr, ev.Text)
		case "result":
			res.Results = append(res.Results, *ev.Result)
		case "error":
			res.Error = ev.Error
		case "end":
			res.ExecutionCount, res.TimedOut = ev.ExecutionCount, ev.TimedOut
		}
		return nil
	})
	if err != nil {
		return wrap(err, "run code")
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

type codeContextList struct {
	Contexts []CodeCtx `json:"contexts"`
}

// codeContexts lists the kernel's contexts (namespaces); one appears when
// a run first names it.
func (s *Server) codeContexts(w http.ResponseWriter, r *http.Request) error {
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	rd, done, err := dialKernel(ctx, g, map[string]any{"op": "contexts"})
	if err != nil {
		return err
	}
	defer done()
	ev, err := readKernel(rd)
	if err != nil {
		return pandastack.Errorf(pandastack.EUnavailable, "the code kernel did not answer (%v)", err)
	}
	if ev.Contexts == nil {
		ev.Contexts = []CodeCtx{}
	}
	writeJSON(w, http.StatusOK, codeContextList{Contexts: ev.Contexts})
	return nil
}
