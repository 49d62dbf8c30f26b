package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/codeinterp"
)

// CodeKernelPort is the guest loopback port of the code kernel baked into
// the code-interpreter template (codeinterp.KernelPort).
const CodeKernelPort = codeinterp.KernelPort

// codeResponse is the answer of a buffered run_code.
type codeResponse struct {
	Stdout         []string            `json:"stdout"`
	Stderr         []string            `json:"stderr"`
	Results        []codeinterp.Result `json:"results"`
	Error          *codeinterp.Error   `json:"error"`
	ExecutionCount int                 `json:"execution_count"`
	TimedOut       bool                `json:"timed_out"`
}

func (s *Server) runCode(w http.ResponseWriter, r *http.Request) error {
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	var body codeinterp.Request
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	if err := body.Validate(maxExecTimeoutSeconds); err != nil {
		return err
	}
	if wantsNDJSON(r) {
		out := newNDJSON(w)
		err := codeinterp.Run(r.Context(), g, body, func(ev codeinterp.Event) error { return out.Send(ev) })
		if err != nil {
			if !out.Started() {
				return err
			}
			if !errors.Is(err, context.Canceled) {
				out.Send(codeinterp.Event{Type: "abort", Abort: s.wireError(r, err)})
			}
		}
		return nil
	}
	res := codeResponse{Stdout: []string{}, Stderr: []string{}, Results: []codeinterp.Result{}}
	var size int64
	err = codeinterp.Run(r.Context(), g, body, func(ev codeinterp.Event) error {
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
	Contexts []codeinterp.Context `json:"contexts"`
}

// codeContexts lists the kernel's contexts (namespaces); one appears when
// a run first names it.
func (s *Server) codeContexts(w http.ResponseWriter, r *http.Request) error {
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	cs, err := codeinterp.Contexts(r.Context(), g)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, codeContextList{Contexts: cs})
	return nil
}
