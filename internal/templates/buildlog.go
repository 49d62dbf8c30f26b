package templates

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Build runs are kept under DATA/builds/NAME/: ID.json (status and steps)
// and ID.log (everything the build printed), so a build's log can be read
// while it runs and after it ended.

func (b *Builder) buildDir(name string) string {
	return filepath.Join(b.cfg.DataDir, "builds", name)
}

// buildRun is one build in progress: its record and its log file.
type buildRun struct {
	b   *Builder
	rec pandastack.TemplateBuild
	log *os.File
	mu  sync.Mutex
}

func newBuildID() string {
	var x [8]byte
	_, _ = rand.Read(x[:])
	return "bld_" + hex.EncodeToString(x[:])
}

// startRun records a new running build of name.
func (b *Builder) startRun(name string) (*buildRun, error) {
	dir := b.buildDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create build log dir: %w", err)
	}
	r := &buildRun{b: b, rec: pandastack.TemplateBuild{ID: newBuildID(), Name: name, Status: "running",
		Steps: []pandastack.BuildStep{}, StartedAt: time.Now().UTC()}}
	f, err := os.OpenFile(filepath.Join(dir, r.rec.ID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create build log: %w", err)
	}
	r.log = f
	return r, r.save()
}

func (r *buildRun) save() error {
	r.mu.Lock()
	data, _ := json.MarshalIndent(r.rec, "", "  ")
	r.mu.Unlock()
	p := filepath.Join(r.b.buildDir(r.rec.Name), r.rec.ID+".json")
	if err := os.WriteFile(p+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

func (r *buildRun) step(s pandastack.BuildStep) {
	r.mu.Lock()
	r.rec.Steps = append(r.rec.Steps, s)
	r.mu.Unlock()
	_ = r.save()
}

// finish records how the build ended. A build that was interrupted (the
// server killed) stays "running" in its file; listing reports it as failed.
func (r *buildRun) finish(t pandastack.Template, err error) {
	now := time.Now().UTC()
	r.mu.Lock()
	r.rec.EndedAt = &now
	if err != nil {
		r.rec.Status = "failed"
		var pe *pandastack.Error
		if errors.As(err, &pe) {
			r.rec.Error = &pandastack.Error{Code: pe.Code, Message: pe.Message}
		} else {
			r.rec.Error = &pandastack.Error{Code: pandastack.EInternal, Message: err.Error()}
		}
	} else {
		r.rec.Status = "succeeded"
		r.rec.Version, r.rec.TemplateID = t.Version, t.ID
	}
	r.mu.Unlock()
	_ = r.save()
	r.log.Close()
}

// Builds lists the build runs of template name, newest first.
func (b *Builder) Builds(ctx context.Context, name string) ([]pandastack.TemplateBuild, error) {
	ents, err := os.ReadDir(b.buildDir(name))
	if errors.Is(err, os.ErrNotExist) {
		return []pandastack.TemplateBuild{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list builds of %s: %w", name, err)
	}
	out := []pandastack.TemplateBuild{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		if br, err := b.Build1(ctx, name, id); err == nil {
			out = append(out, br)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	return out, nil
}

// Build1 returns one build run of template name.
func (b *Builder) Build1(ctx context.Context, name, id string) (pandastack.TemplateBuild, error) {
	var br pandastack.TemplateBuild
	if !validBuildID(id) {
		return br, pandastack.Errorf(pandastack.ENotFound, "template %s has no build %s", name, id)
	}
	data, err := os.ReadFile(filepath.Join(b.buildDir(name), id+".json"))
	if err != nil {
		return br, pandastack.Errorf(pandastack.ENotFound, "template %s has no build %s", name, id)
	}
	if err := json.Unmarshal(data, &br); err != nil {
		return br, fmt.Errorf("read build %s: %w", id, err)
	}
	b.mu.Lock()
	_, live := b.running[id]
	b.mu.Unlock()
	if br.Status == "running" && !live {
		br.Status = "failed"
		br.Error = &pandastack.Error{Code: pandastack.EUnavailable, Message: "the build was interrupted (the server stopped)"}
	}
	return br, nil
}

// BuildLog opens the kept log of a build run.
func (b *Builder) BuildLog(ctx context.Context, name, id string) (io.ReadCloser, error) {
	if _, err := b.Build1(ctx, name, id); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(b.buildDir(name), id+".log"))
	if err != nil {
		return nil, pandastack.Errorf(pandastack.ENotFound, "build %s has no log", id)
	}
	return f, nil
}

func validBuildID(id string) bool {
	rest, ok := strings.CutPrefix(id, "bld_")
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

// runOut runs a command and returns its standard output.
func runOut(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// imageFormat is a disk image's format, by its extension.
func imageFormat(path string) string {
	if strings.HasSuffix(path, ".qcow2") {
		return "qcow2"
	}
	return "raw"
}

// cleanInterrupted removes what builds cut short by a stopped server left:
// half-made step disks and unpacked build contexts. Finished steps stay.
func (b *Builder) cleanInterrupted() {
	tmps, _ := filepath.Glob(filepath.Join(b.cfg.DataDir, "steps", "*.tmp"))
	for _, d := range tmps {
		_ = os.RemoveAll(d)
	}
	_ = os.RemoveAll(filepath.Join(b.cfg.DataDir, "contexts"))
}
