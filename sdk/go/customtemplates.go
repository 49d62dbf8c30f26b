package pandastack

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// TemplateVersion is one build of a template; create from it with template
// "NAME:VERSION" or "NAME:TAG".
type TemplateVersion struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	ID        string    `json:"id"`
	Tags      []string  `json:"tags"`
	CPUs      int       `json:"cpus"`
	MemoryMiB int       `json:"memory_mib"`
	DiskMiB   int       `json:"disk_mib"`
	BuildID   string    `json:"build_id,omitempty"`
	BuiltAt   time.Time `json:"built_at"`
}

// BuildStep is one step of a custom template build.
type BuildStep struct {
	Number      int     `json:"number"`
	Line        int     `json:"line"`
	Instruction string  `json:"instruction"`
	Cached      bool    `json:"cached"`
	DurationMs  float64 `json:"duration_ms"`
}

// TemplateBuild is one run of a custom template build.
type TemplateBuild struct {
	ID         string      `json:"id"`
	TeamID     string      `json:"team_id,omitempty"` // "" for the public catalog
	Name       string      `json:"name"`
	Status     string      `json:"status"` // running, succeeded, failed
	Version    int         `json:"version,omitempty"`
	TemplateID string      `json:"template_id,omitempty"`
	Error      *APIError   `json:"error,omitempty"`
	Steps      []BuildStep `json:"steps"`
	StartedAt  time.Time   `json:"started_at"`
	EndedAt    *time.Time  `json:"ended_at,omitempty"`
}

// CustomBuildParams describe a custom template build.
type CustomBuildParams struct {
	Name string // template name
	Spec []byte // the spec file (see the README for its syntax)
	// ContextDir is the build context COPY reads from (sent whole).
	ContextDir string
	Tag        string // optional tag for the new version
	CPUs       int    // optional: overrides the spec's CPUS
	MemoryMiB  int    // optional: overrides the spec's MEMORY
	DiskGiB    int    // optional: overrides the spec's DISK
	OnLine     func(line string)
	// Team, with an admin key, builds the template for that team (by
	// name) instead of the public catalog.
	Team string
}

// BuildCustomTemplate uploads a spec and its build context and builds the
// template on the server, calling OnLine with each log line. On failure the
// returned *TemplateBuild (when the build started) says which step failed.
// Any key builds for its own team (the name is the team's; public names
// are reserved); an admin key builds for the public catalog, or for Team.
func (c *Client) BuildCustomTemplate(ctx context.Context, p CustomBuildParams) (Template, *TemplateBuild, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, p.Spec, p.ContextDir)) }()
	defer pr.Close()
	q := url.Values{}
	if p.Tag != "" {
		q.Set("tag", p.Tag)
	}
	if p.CPUs != 0 {
		q.Set("cpus", strconv.Itoa(p.CPUs))
	}
	if p.MemoryMiB != 0 {
		q.Set("memory_mib", strconv.Itoa(p.MemoryMiB))
	}
	if p.DiskGiB != 0 {
		q.Set("disk_gib", strconv.Itoa(p.DiskGiB))
	}
	if p.Team != "" {
		q.Set("team", p.Team)
	}
	resp, err := c.send(ctx, request{method: "POST", path: "/v1/templates/" + url.PathEscape(p.Name) + "/build", query: q,
		body: io.Reader(pr), contentType: "application/x-tar", accept: ndjsonType})
	if err != nil {
		return Template{}, nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev struct {
			Type     string         `json:"type"`
			Line     string         `json:"line"`
			Template *Template      `json:"template"`
			Build    *TemplateBuild `json:"build"`
			Error    *APIError      `json:"error"`
		}
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Template{}, nil, fmt.Errorf("pandastack: build stream of %s ended early: %w", p.Name, err)
		}
		switch ev.Type {
		case "log":
			if p.OnLine != nil {
				p.OnLine(ev.Line)
			}
		case "done":
			if ev.Template == nil {
				return Template{}, ev.Build, fmt.Errorf("pandastack: build of %s finished without a template", p.Name)
			}
			return *ev.Template, ev.Build, nil
		case "error":
			e := &APIError{Code: ErrInternal.Code, Message: "unknown error", RequestID: resp.Header.Get("X-Request-Id")}
			if ev.Error != nil {
				e.Code, e.Message = ev.Error.Code, ev.Error.Message
			}
			return Template{}, ev.Build, e
		}
	}
}

// writeContext writes the spec (as .pandastack-spec) and the context
// directory as a tar stream. Symbolic links are sent as links: the server
// refuses a COPY that would follow one out of the context.
func writeContext(w io.Writer, spec []byte, dir string) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(&tar.Header{Name: ".pandastack-spec", Mode: 0o644, Size: int64(len(spec)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(spec); err != nil {
		return err
	}
	if dir != "" {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil || rel == "." || rel == ".pandastack-spec" {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			link := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				if link, err = os.Readlink(p); err != nil {
					return err
				}
			} else if !fi.Mode().IsRegular() && !fi.IsDir() {
				return nil
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				return err
			}
			h.Name = filepath.ToSlash(rel)
			if fi.IsDir() {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if fi.Mode().IsRegular() {
				f, err := os.Open(p)
				if err != nil {
					return err
				}
				defer f.Close()
				_, err = io.Copy(tw, f)
				return err
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("pack build context %s: %w", dir, err)
		}
	}
	return tw.Close()
}

// TemplateVersions lists a template's versions, oldest first.
func (c *Client) TemplateVersions(ctx context.Context, name string) ([]TemplateVersion, error) {
	var out struct {
		Versions []TemplateVersion `json:"versions"`
	}
	err := c.do(ctx, request{method: "GET", path: "/v1/templates/" + url.PathEscape(name) + "/versions"}, &out)
	return out.Versions, err
}

// TemplateBuilds lists a template's custom build runs, newest first: the
// caller's team's, else the public template's.
func (c *Client) TemplateBuilds(ctx context.Context, name string) ([]TemplateBuild, error) {
	var out struct {
		Builds []TemplateBuild `json:"builds"`
	}
	err := c.do(ctx, request{method: "GET", path: "/v1/templates/" + url.PathEscape(name) + "/builds"}, &out)
	return out.Builds, err
}

// TemplateBuildLog returns the kept log of a build run of the caller's
// team or of a public template.
func (c *Client) TemplateBuildLog(ctx context.Context, name, buildID string) (string, error) {
	resp, err := c.send(ctx, request{method: "GET", path: "/v1/templates/" + url.PathEscape(name) + "/builds/" + url.PathEscape(buildID) + "/logs", accept: "text/plain"})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
