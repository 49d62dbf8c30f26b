package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// BuildCatalog builds (or finds in the cache) catalog template name and
// records the build as its newest public version.
func (r *Registry) BuildCatalog(ctx context.Context, name string, log io.Writer) (pandastack.Template, error) {
	if r.cfg.Builder == nil {
		return pandastack.Template{}, pandastack.Errorf(pandastack.EUnavailable, "this server does not build templates")
	}
	t, err := r.cfg.Builder.Build(ctx, name, log)
	if err != nil {
		return t, err
	}
	t.TeamID, t.Version = "", 0
	if t, err = r.cfg.Store.AddTemplateVersion(ctx, t, "", ""); err != nil {
		return t, fmt.Errorf("record template %s: %w", name, err)
	}
	return t, nil
}

// CustomRequest asks for a custom template built from an uploaded build
// context (a tar stream carrying the spec).
type CustomRequest struct {
	pandastack.CustomBuild
	// Capped callers (non-admin keys) are held to MaxBuildsPerTeam.
	Capped bool
}

// BuildCustom builds a team's custom template (TeamID "": a public one),
// streaming its log to log; the run (status, steps, log) is kept, and a
// successful build becomes the template's newest version.
func (r *Registry) BuildCustom(ctx context.Context, req CustomRequest, tar io.Reader, log io.Writer) (pandastack.TemplateBuild, pandastack.Template, error) {
	var none pandastack.TemplateBuild
	if r.cfg.Builder == nil {
		return none, pandastack.Template{}, pandastack.Errorf(pandastack.EUnavailable, "this server does not build custom templates")
	}
	if !ValidName(req.Name) {
		return none, pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "template name %q may hold only letters, digits, '.', '_' and '-', starting with a letter or digit", req.Name)
	}
	if req.TeamID == "" && slices.Contains(r.cfg.Catalog, req.Name) {
		return none, pandastack.Template{}, pandastack.Errorf(pandastack.EConflict, "%q is a catalog template; choose another name for a custom one", req.Name)
	}
	if req.TeamID != "" {
		taken, err := r.reserved(ctx, req.Name)
		if err != nil {
			return none, pandastack.Template{}, fmt.Errorf("check template name %s: %w", req.Name, err)
		}
		if taken {
			return none, pandastack.Template{}, pandastack.Errorf(pandastack.EConflict, "%q is a public template's name; choose another name for your custom template", req.Name)
		}
	}
	if req.Capped {
		release, err := r.reserve(ctx, req.TeamID)
		if err != nil {
			return none, pandastack.Template{}, err
		}
		defer release()
	}
	run := &buildRun{r: r, log: log, rec: pandastack.TemplateBuild{ID: newBuildID(), TeamID: req.TeamID, Name: req.Name,
		Status: "running", Steps: []pandastack.BuildStep{}}}
	defer run.close()
	cb := req.CustomBuild
	cb.Run = run
	cb.ResolveFrom = func(ctx context.Context, ref string) (string, error) {
		t, err := r.Resolve(ctx, req.TeamID, ref)
		if err != nil {
			return "", err
		}
		return t.Name + "@" + t.ID, nil
	}
	t, err := r.cfg.Builder.BuildFromTar(ctx, cb, tar, log)
	if err == nil {
		t.TeamID, t.Version = req.TeamID, 0
		if t, err = r.cfg.Store.AddTemplateVersion(context.WithoutCancel(ctx), t, run.rec.ID, req.Tag); err != nil {
			err = fmt.Errorf("record template %s: %w", req.Name, err)
		}
	}
	if !run.started() {
		return none, t, err // refused before it began: no run is kept
	}
	return run.finish(ctx, t, err), t, err
}

// reserve counts a capped custom build of a team until release: against
// the team's max_concurrent_builds quota when the registry has the quota
// service, else against MaxBuildsPerTeam.
func (r *Registry) reserve(ctx context.Context, teamID string) (release func(), err error) {
	if r.cfg.Quotas != nil {
		// A build makes a template version, which counts against the
		// team's max_disk_gib once it is recorded: a team already at its
		// limit builds nothing (the MiB held here is a token of that).
		return r.cfg.Quotas.Reserve(ctx, teamID, quotas.Usage{Builds: 1, DiskMiB: 1})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.building[teamID]; n >= r.cfg.MaxBuildsPerTeam {
		return nil, pandastack.Errorf(pandastack.EQuota,
			"team has %d template builds running (limit %d); wait for one to finish", n, r.cfg.MaxBuildsPerTeam)
	}
	r.building[teamID]++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.building[teamID]--; r.building[teamID] <= 0 {
			delete(r.building, teamID)
		}
	}, nil
}

func newBuildID() string {
	var x [8]byte
	_, _ = rand.Read(x[:])
	return "bld_" + hex.EncodeToString(x[:])
}

func validBuildID(id string) bool {
	rest, ok := strings.CutPrefix(id, "bld_")
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

func (r *Registry) logPath(id string) string { return filepath.Join(r.cfg.LogDir, id+".log") }

// buildRun is a custom build's run: its record in the store and its kept
// log. It implements pandastack.BuildRun.
type buildRun struct {
	r   *Registry
	log io.Writer // the caller's stream
	mu  sync.Mutex
	rec pandastack.TemplateBuild
	f   *os.File
	out *cappedWriter // the kept log, nil until Start
}

// Start records the run as running and opens its log.
func (b *buildRun) Start(ctx context.Context) (io.Writer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.out != nil {
		return b.out, nil
	}
	if err := os.MkdirAll(b.r.cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("create build log dir: %w", err)
	}
	f, err := os.OpenFile(b.r.logPath(b.rec.ID), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create build log: %w", err)
	}
	b.rec.StartedAt = time.Now().UTC()
	if err := b.r.cfg.Store.PutTemplateBuild(ctx, b.rec); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("record build: %w", err)
	}
	b.r.mu.Lock()
	b.r.running[b.rec.ID] = true
	b.r.mu.Unlock()
	b.f, b.out = f, &cappedWriter{w: f, left: b.r.cfg.MaxLogBytes}
	fmt.Fprintf(io.MultiWriter(b.log, b.out), "build %s of template %s\n", b.rec.ID, b.rec.Name)
	return b.out, nil
}

// Step records a finished step.
func (b *buildRun) Step(s pandastack.BuildStep) {
	b.mu.Lock()
	b.rec.Steps = append(b.rec.Steps, s)
	rec := b.rec
	b.mu.Unlock()
	if err := b.r.cfg.Store.PutTemplateBuild(context.Background(), rec); err != nil {
		b.r.log.Warn("record build step", "build", rec.ID, "err", err)
	}
}

func (b *buildRun) started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out != nil
}

// finish records how the build ended and returns its record.
func (b *buildRun) finish(ctx context.Context, t pandastack.Template, err error) pandastack.TemplateBuild {
	b.mu.Lock()
	now := time.Now().UTC()
	b.rec.EndedAt = &now
	var line string
	if err != nil {
		b.rec.Status = "failed"
		var pe *pandastack.Error
		if errors.As(err, &pe) {
			b.rec.Error = &pandastack.Error{Code: pe.Code, Message: pe.Message}
		} else {
			b.rec.Error = &pandastack.Error{Code: pandastack.EInternal, Message: err.Error()}
		}
		line = "build failed: " + b.rec.Error.Message + "\n"
	} else {
		b.rec.Status, b.rec.Version, b.rec.TemplateID = "succeeded", t.Version, t.ID
		line = fmt.Sprintf("template %s version %d ready (%s)\n", t.Name, t.Version, t.ID)
	}
	rec := b.rec
	b.mu.Unlock()
	_, _ = io.WriteString(b.log, line)
	b.out.writeAlways(line)
	if perr := b.r.cfg.Store.PutTemplateBuild(context.WithoutCancel(ctx), rec); perr != nil {
		b.r.log.Error("record build", "build", rec.ID, "err", perr)
	}
	return rec
}

// close ends the run's life in this process.
func (b *buildRun) close() {
	b.r.mu.Lock()
	delete(b.r.running, b.rec.ID)
	b.r.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.f != nil {
		b.f.Close()
	}
}

// cappedWriter keeps at most left bytes; past that it notes the cut once
// and drops the rest (without failing the writes: the build goes on).
type cappedWriter struct {
	mu   sync.Mutex
	w    io.Writer
	left int64
	cut  bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return len(p), nil
	}
	if int64(len(p)) > c.left {
		if c.left > 0 {
			_, _ = c.w.Write(p[:c.left])
		}
		c.cut = true
		_, _ = io.WriteString(c.w, "\n[log cut here: the kept log is capped; the rest of the build's output was streamed, not kept]\n")
		return len(p), nil
	}
	c.left -= int64(len(p))
	if _, err := c.w.Write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeAlways writes a last line past the cap (how the build ended).
func (c *cappedWriter) writeAlways(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.w, s)
}

// Builds lists the build runs of the template name a team sees, newest
// first: its own runs if it has a template or runs of that name, else the
// public ones.
func (r *Registry) Builds(ctx context.Context, teamID, name string) ([]pandastack.TemplateBuild, error) {
	if !ValidName(name) {
		return []pandastack.TemplateBuild{}, nil
	}
	owner, err := r.buildOwner(ctx, teamID, name)
	if err != nil {
		return nil, err
	}
	bs, err := r.cfg.Store.ListTemplateBuilds(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	for i := range bs {
		r.interrupted(&bs[i])
	}
	return bs, nil
}

// buildOwner is the team whose runs of name a team sees.
func (r *Registry) buildOwner(ctx context.Context, teamID, name string) (string, error) {
	if teamID == "" {
		return "", nil
	}
	vs, err := r.cfg.Store.ListTemplateVersions(ctx, teamID, name)
	if err != nil || len(vs) > 0 {
		return teamID, err
	}
	bs, err := r.cfg.Store.ListTemplateBuilds(ctx, teamID, name)
	if err != nil || len(bs) > 0 {
		return teamID, err
	}
	return "", nil
}

// interrupted reports a run recorded as running that no build in this
// process runs (the server stopped during it) as failed.
func (r *Registry) interrupted(b *pandastack.TemplateBuild) {
	if b.Status != "running" {
		return
	}
	r.mu.Lock()
	live := r.running[b.ID]
	r.mu.Unlock()
	if !live {
		b.Status = "failed"
		b.Error = &pandastack.Error{Code: pandastack.EUnavailable, Message: "the build was interrupted (the server stopped)"}
	}
}

// Build returns one build run of template name, as a team sees it: its own
// or a public one; another team's answers like a missing one.
func (r *Registry) Build(ctx context.Context, teamID, name, id string) (pandastack.TemplateBuild, error) {
	missing := pandastack.Errorf(pandastack.ENotFound, "template %s has no build %s", name, id)
	if !validBuildID(id) {
		return pandastack.TemplateBuild{}, missing
	}
	b, err := r.cfg.Store.GetTemplateBuild(ctx, id)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return b, missing
	}
	if err != nil {
		return b, fmt.Errorf("get build %s: %w", id, err)
	}
	if b.Name != name || (b.TeamID != "" && b.TeamID != teamID) {
		return pandastack.TemplateBuild{}, missing
	}
	r.interrupted(&b)
	return b, nil
}

// BuildLog opens the kept log of a build run a team sees.
func (r *Registry) BuildLog(ctx context.Context, teamID, name, id string) (io.ReadCloser, error) {
	if _, err := r.Build(ctx, teamID, name, id); err != nil {
		return nil, err
	}
	f, err := os.Open(r.logPath(id))
	if err != nil {
		return nil, pandastack.Errorf(pandastack.ENotFound, "build %s has no log", id)
	}
	return f, nil
}
