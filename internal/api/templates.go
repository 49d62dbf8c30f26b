package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// Templates is the template registry the API serves (registry.Registry):
// every method takes the caller's team, and answers only with that team's
// templates and the public catalog's. (Sandbox creates resolve their
// template through the Engine: see registry.Engine.)
type Templates interface {
	Resolve(ctx context.Context, teamID, ref string) (pandastack.Template, error)
	List(ctx context.Context, teamID string) ([]pandastack.Template, error)
	Versions(ctx context.Context, teamID, name string) ([]pandastack.TemplateVersion, error)
	VersionOf(ctx context.Context, teamID, name, id string) int
	Builds(ctx context.Context, teamID, name string) ([]pandastack.TemplateBuild, error)
	Build(ctx context.Context, teamID, name, id string) (pandastack.TemplateBuild, error)
	BuildLog(ctx context.Context, teamID, name, id string) (io.ReadCloser, error)
	BuildCatalog(ctx context.Context, name string, log io.Writer) (pandastack.Template, error)
	BuildCustom(ctx context.Context, req registry.CustomRequest, tar io.Reader, log io.Writer) (pandastack.TemplateBuild, pandastack.Template, error)
}

var _ Templates = (*registry.Registry)(nil)

// templates returns the registry, or why there is none.
func (s *Server) templates() (Templates, error) {
	if s.cfg.Templates == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "this server keeps no template registry")
	}
	return s.cfg.Templates, nil
}

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
	reg, err := s.templates()
	if err != nil {
		return err
	}
	ts, err := reg.List(r.Context(), caller(r).team.ID)
	if err != nil {
		return wrap(err, "list templates")
	}
	if ts == nil {
		ts = []pandastack.Template{}
	}
	writeJSON(w, http.StatusOK, templateList{Templates: ts})
	return nil
}

// errCatalogBuild refuses a catalog build to a key that is not an admin's.
var errCatalogBuild = pandastack.Errorf(pandastack.EForbidden,
	"building a catalog template needs an admin API key; upload a spec (Content-Type: application/x-tar) to build a custom template")

func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := checkName("template", name); err != nil {
		return err
	}
	if err := s.quotas.CheckSpace(r.Context()); err != nil {
		return err
	}
	if isTar(r) {
		return s.buildCustomTemplate(w, r, name)
	}
	if !caller(r).key.Admin {
		return errCatalogBuild
	}
	reg, err := s.templates()
	if err != nil {
		return err
	}
	out := newNDJSON(w)
	lw := &lineWriter{emit: func(line string) error {
		return out.Send(buildEvent{Type: "log", Line: line})
	}}
	t, err := reg.BuildCatalog(r.Context(), name, lw)
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
