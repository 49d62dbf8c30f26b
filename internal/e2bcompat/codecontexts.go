package e2bcompat

import (
	"net/http"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/codeinterp"
)

// E2B's code contexts (createCodeContext, listCodeContexts,
// removeCodeContext, restartCodeContext) on the code interpreter's port:
// POST /contexts {"language","cwd"}, GET /contexts, DELETE /contexts/ID,
// POST /contexts/ID/restart. They map onto the kernel's contexts
// (internal/codeinterp): one Python namespace each, with a working
// directory of its own. The SDK sends these without the sandbox's access
// token (E2B's server takes them so too): they never run code, which
// POST /execute, token-checked, does.

// codeContext is a context as E2B's SDK reads it.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

type createContextRequest struct {
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// serveContexts answers a request under /contexts; it reports whether the
// path was one of them.
func (s *Server) serveContexts(w http.ResponseWriter, r *http.Request, sb pandastack.Sandbox, id string) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, "/contexts")
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		return false
	}
	g, err := s.cfg.Engine.Guest(r.Context(), sb.ID)
	if err != nil {
		writeProxyError(w, id, "The sandbox is not running")
		return true
	}
	fail := func(err error) {
		switch pandastack.ErrorCode(err) {
		case pandastack.ENotFound:
			writeAPIError(w, http.StatusNotFound, pandastack.ErrorMessage(err))
		case pandastack.EInvalid:
			writeAPIError(w, http.StatusBadRequest, pandastack.ErrorMessage(err))
		case pandastack.EConflict:
			if strings.Contains(pandastack.ErrorMessage(err), "no code kernel") {
				writeProxyError(w, id, "The sandbox is running but port is not open")
				return
			}
			writeAPIError(w, http.StatusConflict, pandastack.ErrorMessage(err))
		default:
			writeAPIError(w, http.StatusBadGateway, pandastack.ErrorMessage(err))
		}
	}
	ctxID, action, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	switch {
	case rest == "" && r.Method == http.MethodGet:
		cs, err := codeinterp.Contexts(r.Context(), g)
		if err != nil {
			fail(err)
			return true
		}
		out := make([]codeContext, 0, len(cs))
		for _, c := range cs {
			out = append(out, codeContext{ID: c.ID, Language: "python", Cwd: c.Cwd})
		}
		writeJSON(w, http.StatusOK, out)
	case rest == "" && r.Method == http.MethodPost:
		var req createContextRequest
		if err := decodeBody(r, &req); err != nil {
			writeAPIError(w, http.StatusBadRequest, pandastack.ErrorMessage(err))
			return true
		}
		if l := strings.ToLower(req.Language); l != "" && l != "python" {
			writeAPIError(w, http.StatusBadRequest, "language "+req.Language+" is not supported: PandaStack's code interpreter runs Python")
			return true
		}
		c, err := codeinterp.CreateContext(r.Context(), g, pandastack.NewID("ctx-"), req.Cwd)
		if err != nil {
			fail(err)
			return true
		}
		writeJSON(w, http.StatusOK, codeContext{ID: c.ID, Language: "python", Cwd: c.Cwd})
	case ctxID != "" && action == "" && r.Method == http.MethodDelete:
		if err := codeinterp.RemoveContext(r.Context(), g, ctxID); err != nil {
			fail(err)
			return true
		}
		w.WriteHeader(http.StatusNoContent)
	case ctxID != "" && action == "restart" && r.Method == http.MethodPost:
		if err := codeinterp.RestartContext(r.Context(), g, ctxID); err != nil {
			fail(err)
			return true
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		writeAPIError(w, http.StatusNotFound, r.Method+" "+r.URL.Path+" of the code interpreter is not implemented by PandaStack's E2B compatibility")
	}
	return true
}
