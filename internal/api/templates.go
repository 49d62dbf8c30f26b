package api

import (
	"bytes"
	"errors"
	"net/http"
	"sync"

	"github.com/pandastack/pandastack"
)

type templateList struct {
	Templates []pandastack.Template `json:"templates"`
}

// buildEvent is one line of a template build stream:
//
//	{"type":"log","line":"..."}
//	{"type":"done","template":{...}}            (last line on success)
//	{"type":"error","error":{"code","message"}} (last line on failure)
type buildEvent struct {
	Type     string                    `json:"type"`
	Line     string                    `json:"line,omitempty"`
	Template *pandastack.Template      `json:"template,omitempty"`
	Build    *pandastack.TemplateBuild `json:"build,omitempty"` // custom builds: steps, cache hits
	Error    *pandastack.Error         `json:"error,omitempty"`
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) error {
	ts, err := s.cfg.Store.ListTemplates(r.Context())
	if err != nil {
		return wrap(err, "list templates")
	}
	if ts == nil {
		ts = []pandastack.Template{}
	}
	writeJSON(w, http.StatusOK, templateList{Templates: ts})
	return nil
}

func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := checkName("template", name); err != nil {
		return err
	}
	if isTar(r) {
		return s.buildCustomTemplate(w, r, name)
	}
	if s.cfg.Builder == nil {
		return pandastack.Errorf(pandastack.EUnavailable, "this server does not build templates")
	}
	out := newNDJSON(w)
	lw := &lineWriter{emit: func(line string) error {
		return out.Send(buildEvent{Type: "log", Line: line})
	}}
	t, err := s.cfg.Builder.Build(r.Context(), name, lw)
	lw.Close()
	if err != nil {
		if !out.Started() {
			return wrap(err, "build template "+name)
		}
		out.Send(buildEvent{Type: "error", Error: s.wireError(r, wrap(err, "build template "+name))})
		return nil
	}
	s.log.InfoContext(r.Context(), "template built", "request_id", requestID(r), "template", t.Name, "id", t.ID)
	out.Send(buildEvent{Type: "done", Template: &t})
	return nil
}

// lineWriter turns writes into whole lines, handing each to emit. It is safe
// for concurrent use. Once emit fails (the client left), later writes fail
// too, which tells a builder that checks its writes to stop.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string) error
	err  error
}

// maxLogLine splits overlong lines so one line cannot grow without bound.
const maxLogLine = 64 << 10

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err != nil {
		return 0, lw.err
	}
	lw.buf = append(lw.buf, p...)
	for {
		i := bytes.IndexByte(lw.buf, '\n')
		if i < 0 && len(lw.buf) < maxLogLine {
			break
		}
		end, next := i, i+1
		if i < 0 || i > maxLogLine {
			end, next = maxLogLine, maxLogLine
		}
		line := string(bytes.TrimSuffix(lw.buf[:end], []byte("\r")))
		lw.buf = lw.buf[next:]
		if lw.err = lw.emit(line); lw.err != nil {
			return 0, lw.err
		}
	}
	return len(p), nil
}

// errLogClosed fails writes that come after the build returned.
var errLogClosed = errors.New("build log closed")

// Close emits a final unterminated line, if any; later writes fail.
func (lw *lineWriter) Close() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err == nil && len(lw.buf) > 0 {
		lw.err = lw.emit(string(lw.buf))
		lw.buf = nil
	}
	err := lw.err
	if lw.err == nil {
		lw.err = errLogClosed
	}
	return err
}
