package pandastack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// CodeOptions configures RunCode.
type CodeOptions struct {
	Language       string  // "python" (the default)
	ContextID      string  // the namespace to run in; "" is "default"
	TimeoutSeconds float64 // interrupt the run after this long; 0: no limit
	OnStdout       func(string)
	OnStderr       func(string)
	OnResult       func(CodeResult)
}

// CodeResult is one rich output: the value of the last expression, or a
// matplotlib figure (PNG).
type CodeResult struct {
	Text         string `json:"text,omitempty"`
	PNG          string `json:"png,omitempty"` // base64
	HTML         string `json:"html,omitempty"`
	IsMainResult bool   `json:"is_main_result"`
}

// PNGBytes decodes PNG (nil if the result has none).
func (r CodeResult) PNGBytes() ([]byte, error) {
	if r.PNG == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(r.PNG)
}

// CodeError is the exception a run raised (a TimeoutError for a run
// interrupted by its timeout).
type CodeError struct {
	Name      string   `json:"name"`
	Value     string   `json:"value"`
	Traceback []string `json:"traceback"`
}

func (e *CodeError) Error() string { return e.Name + ": " + e.Value }

// Execution is what a run produced.
type Execution struct {
	Stdout         string       `json:"stdout"`
	Stderr         string       `json:"stderr"`
	Results        []CodeResult `json:"results"`
	Error          *CodeError   `json:"error"` // nil if the code ran to the end
	ExecutionCount int          `json:"execution_count"`
	TimedOut       bool         `json:"timed_out"`
}

// Text is the text of the main result (the last expression's value), or "".
func (e *Execution) Text() string {
	for _, r := range e.Results {
		if r.IsMainResult {
			return r.Text
		}
	}
	return ""
}

// CodeContext is one interpreter namespace of a sandbox's kernel.
type CodeContext struct {
	ID             string `json:"id"`
	ExecutionCount int    `json:"execution_count"`
}

// RunCode runs code in the sandbox's live interpreter (code-interpreter
// template): variables, imports and functions persist between calls in the
// same context. An exception in the code is Execution.Error, not err.
func (s *Sandbox) RunCode(ctx context.Context, code string, opts CodeOptions) (*Execution, error) {
	body := struct {
		Code           string  `json:"code"`
		Language       string  `json:"language,omitempty"`
		ContextID      string  `json:"context_id,omitempty"`
		TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	}{code, opts.Language, opts.ContextID, opts.TimeoutSeconds}
	resp, err := s.c.send(ctx, request{method: "POST", path: s.path("/code"), body: body, accept: ndjsonType})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readCodeStream(resp.Body, resp.Header.Get("X-Request-Id"), opts)
}

// CodeContexts lists the sandbox kernel's contexts.
func (s *Sandbox) CodeContexts(ctx context.Context) ([]CodeContext, error) {
	var out struct {
		Contexts []CodeContext `json:"contexts"`
	}
	if err := s.c.do(ctx, request{method: "GET", path: s.path("/code/contexts")}, &out); err != nil {
		return nil, err
	}
	return out.Contexts, nil
}

type codeEvent struct {
	Type           string      `json:"type"`
	Text           string      `json:"text"`
	Result         *CodeResult `json:"result"`
	Error          *CodeError  `json:"error"`
	ExecutionCount int         `json:"execution_count"`
	TimedOut       bool        `json:"timed_out"`
	Abort          *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"abort"`
}

func readCodeStream(r io.Reader, requestID string, opts CodeOptions) (*Execution, error) {
	ex := &Execution{}
	var out, errOut strings.Builder
	dec := json.NewDecoder(r)
	for {
		var ev codeEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return ex, fmt.Errorf("pandastack: code stream ended before the run did: %w", err)
		}
		switch ev.Type {
		case "stdout":
			out.WriteString(ev.Text)
			if opts.OnStdout != nil {
				opts.OnStdout(ev.Text)
			}
		case "stderr":
			errOut.WriteString(ev.Text)
			if opts.OnStderr != nil {
				opts.OnStderr(ev.Text)
			}
		case "result":
			if ev.Result != nil {
				ex.Results = append(ex.Results, *ev.Result)
				if opts.OnResult != nil {
					opts.OnResult(*ev.Result)
				}
			}
		case "error":
			ex.Error = ev.Error
		case "end":
			ex.ExecutionCount, ex.TimedOut = ev.ExecutionCount, ev.TimedOut
			ex.Stdout, ex.Stderr = out.String(), errOut.String()
			return ex, nil
		case "abort":
			e := &APIError{Code: ErrInternal.Code, Message: "unknown error", RequestID: requestID}
			if ev.Abort != nil {
				e.Code, e.Message = ev.Abort.Code, ev.Abort.Message
			}
			ex.Stdout, ex.Stderr = out.String(), errOut.String()
			return ex, e
		}
	}
}
