package api

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// maxContextBody bounds an uploaded build context.
const maxContextBody = 2 << 30

// templateName is the checked template name of a request's path and the
// registry that keeps its versions and builds.
func (s *Server) templateName(r *http.Request) (string, Templates, error) {
	name := r.PathValue("name")
	if err := checkName("template", name); err != nil {
		return "", nil, err
	}
	reg, err := s.templates()
	return name, reg, err
}

// buildTeam is the team a custom build is for: the caller's own; for an
// admin key, the public catalog ("") unless ?team=NAME names a team.
func (s *Server) buildTeam(r *http.Request) (string, error) {
	p := caller(r)
	name := r.URL.Query().Get("team")
	if !p.key.Admin {
		if name != "" && name != p.team.Name {
			return "", pandastack.Errorf(pandastack.EForbidden, "only an admin key builds templates for another team")
		}
		return p.team.ID, nil
	}
	if name == "" {
		return "", nil
	}
	t, err := s.cfg.Store.TeamByName(r.Context(), name)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return "", pandastack.Errorf(pandastack.ENotFound, "team %q not found", name)
	}
	if err != nil {
		return "", wrap(err, "look up team "+name)
	}
	return t.ID, nil
}

// intQuery reads an optional whole-number query parameter.
func intQuery(r *http.Request, key string) (int, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, invalid("%s must be a positive whole number, got %q", key, v)
	}
	return n, nil
}

// buildCustomTemplate builds a template from an uploaded spec and build
// context (a tar stream, the spec as its .pandastack-spec entry).
func (s *Server) buildCustomTemplate(w http.ResponseWriter, r *http.Request, name string) error {
	reg, err := s.templates()
	if err != nil {
		return err
	}
	teamID, err := s.buildTeam(r)
	if err != nil {
		return err
	}
	req := registry.CustomRequest{Capped: !caller(r).key.Admin,
		CustomBuild: pandastack.CustomBuild{TeamID: teamID, Name: name, Tag: r.URL.Query().Get("tag")}}
	if req.Tag != "" {
		if err := checkName("tag", req.Tag); err != nil {
			return err
		}
	}
	if req.CPUs, err = intQuery(r, "cpus"); err != nil {
		return err
	}
	if req.MemoryMiB, err = intQuery(r, "memory_mib"); err != nil {
		return err
	}
	if req.DiskGiB, err = intQuery(r, "disk_gib"); err != nil {
		return err
	}
	if err := checkSize(req.CPUs, req.MemoryMiB, req.DiskGiB); err != nil {
		return err
	}
	out := newNDJSON(w)
	lw := &lineWriter{emit: func(line string) error {
		return out.Send(buildEvent{Type: "log", Line: line})
	}}
	noReadDeadline(w) // a build context may be large and slow to upload
	br, t, err := reg.BuildCustom(r.Context(), req, http.MaxBytesReader(w, r.Body, maxContextBody), lw)
	lw.Close()
	if err != nil {
		if !out.Started() {
			return wrap(err, "build template "+name)
		}
		out.Send(buildEvent{Type: "error", Build: &br, Error: s.wireError(r, wrap(err, "build template "+name))})
		return nil
	}
	s.log.InfoContext(r.Context(), "custom template built", "request_id", requestID(r), "template", t.Name, "id", t.ID,
		"version", t.Version, "team", caller(r).team.Name, "public", t.TeamID == "")
	out.Send(buildEvent{Type: "done", Template: &t, Build: &br})
	return nil
}

// checkSize validates a build's size (see pandastack.CheckSize).
func checkSize(cpus, mem, disk int) error { return pandastack.CheckSize(cpus, mem, disk) }

type versionList struct {
	Versions []pandastack.TemplateVersion `json:"versions"`
}

type buildList struct {
	Builds []pandastack.TemplateBuild `json:"builds"`
}

func (s *Server) listVersions(w http.ResponseWriter, r *http.Request) error {
	name, reg, err := s.templateName(r)
	if err != nil {
		return err
	}
	vs, err := reg.Versions(r.Context(), caller(r).team.ID, name)
	if err != nil {
		return wrap(err, "list versions of "+name)
	}
	writeJSON(w, http.StatusOK, versionList{Versions: vs})
	return nil
}

func (s *Server) listBuilds(w http.ResponseWriter, r *http.Request) error {
	name, reg, err := s.templateName(r)
	if err != nil {
		return err
	}
	bs, err := reg.Builds(r.Context(), caller(r).team.ID, name)
	if err != nil {
		return wrap(err, "list builds of "+name)
	}
	writeJSON(w, http.StatusOK, buildList{Builds: bs})
	return nil
}

func (s *Server) getBuild(w http.ResponseWriter, r *http.Request) error {
	name, reg, err := s.templateName(r)
	if err != nil {
		return err
	}
	b, err := reg.Build(r.Context(), caller(r).team.ID, name, r.PathValue("build"))
	if err != nil {
		return wrap(err, "get build")
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (s *Server) buildLogs(w http.ResponseWriter, r *http.Request) error {
	name, reg, err := s.templateName(r)
	if err != nil {
		return err
	}
	rc, err := reg.BuildLog(r.Context(), caller(r).team.ID, name, r.PathValue("build"))
	if err != nil {
		return wrap(err, "read build log")
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, rc)
	return nil
}

// isTar says whether a build request uploads a build context.
func isTar(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/x-tar")
}
