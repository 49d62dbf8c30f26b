package e2bcompat

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/codeinterp"
)

// CodePort is the port E2B's code-interpreter SDK addresses its server on.
// PandaStack's code-interpreter template runs its own kernel protocol on
// that guest port (internal/codeinterp); this file translates E2B's
// POST /execute onto it.
const CodePort = codeinterp.KernelPort

// maxRunSeconds bounds a run (a day, as our own API does).
const maxRunSeconds = 24 * 60 * 60

type executeRequest struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// serveCode serves the code interpreter's HTTP surface: POST /execute
// (NDJSON lines as E2B's server writes them), the contexts
// (codecontexts.go) and GET /health.
func (s *Server) serveCode(w http.ResponseWriter, r *http.Request, sb pandastack.Sandbox, id string) {
	switch {
	case r.URL.Path == "/health" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, "OK")
		return
	case s.serveContexts(w, r, sb, id):
		return
	case r.URL.Path != "/execute" || r.Method != http.MethodPost:
		writeAPIError(w, http.StatusNotFound, r.Method+" "+r.URL.Path+" of the code interpreter is not implemented by PandaStack's E2B compatibility yet")
		return
	}
	if !s.tokenOK(sb.ID, r.Header.Get("X-Access-Token")) {
		writeAPIError(w, http.StatusUnauthorized, "the X-Access-Token header is missing or wrong for sandbox "+id)
		return
	}
	var req executeRequest
	if err := decodeBody(r, &req); err != nil {
		writeAPIError(w, http.StatusBadRequest, pandastack.ErrorMessage(err))
		return
	}
	run := codeinterp.Request{Code: req.Code, Language: req.Language, ContextID: req.ContextID, Env: req.EnvVars}
	if err := run.Validate(maxRunSeconds); err != nil {
		writeAPIError(w, http.StatusBadRequest, pandastack.ErrorMessage(err))
		return
	}
	g, err := s.cfg.Engine.Guest(r.Context(), sb.ID)
	if err != nil {
		writeProxyError(w, id, "The sandbox is not running")
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a run may outlast the body deadline
	_ = rc.SetWriteDeadline(time.Time{})
	started := false
	line := func(v any) error {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
		}
		b, _ := json.Marshal(v)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}
	now := func() string { return time.Now().UTC().Format(time.RFC3339Nano) }
	err = codeinterp.Run(r.Context(), g, run, func(ev codeinterp.Event) error {
		switch ev.Type {
		case "stdout", "stderr":
			return line(map[string]any{"type": ev.Type, "text": ev.Text, "timestamp": now()})
		case "result":
			res := map[string]any{"type": "result", "is_main_result": ev.Result.IsMainResult}
			for k, v := range map[string]string{"text": ev.Result.Text, "png": ev.Result.PNG, "html": ev.Result.HTML} {
				if v != "" {
					res[k] = v
				}
			}
			return line(res)
		case "error":
			return line(map[string]any{"type": "error", "name": ev.Error.Name, "value": ev.Error.Value,
				"traceback": strings.Join(ev.Error.Traceback, "\n")})
		case "end":
			if err := line(map[string]any{"type": "number_of_executions", "execution_count": ev.ExecutionCount}); err != nil {
				return err
			}
			return line(map[string]any{"type": "end_of_execution"})
		}
		return nil
	})
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if started {
		s.log.InfoContext(r.Context(), "e2b: run cut short", "sandbox", sb.ID, "err", err)
		return
	}
	if pandastack.ErrorCode(err) == pandastack.EConflict { // no kernel in this template
		writeProxyError(w, id, "The sandbox is running but port is not open")
		return
	}
	writeAPIError(w, http.StatusBadGateway, pandastack.ErrorMessage(err))
}
