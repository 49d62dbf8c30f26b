package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pandastack/pandastack"
)

// Import moves a data dir's registry from the old host-file layout into the
// store, once, before the server serves:
//
//   - DATA/templates/NAME/versions.json (every version of NAME with its
//     tags) replaces NAME's versions in the store (the store's migration made
//     the old current build version 1) and is renamed versions.json.imported;
//   - DATA/builds/NAME/ID.json (a build run) becomes a record in the store
//     and its log DATA/builds/NAME/ID.log moves to LogDir/ID.log.
//
// Everything the old layout held was public (there were no team templates).
// A second run finds nothing left to import; a run cut short is redone.
func (r *Registry) Import(ctx context.Context, dataDir string) error {
	vfiles, err := filepath.Glob(filepath.Join(dataDir, "templates", "*", "versions.json"))
	if err != nil {
		return fmt.Errorf("import template versions: %w", err)
	}
	for _, f := range vfiles {
		if err := r.importVersions(ctx, f); err != nil {
			return err
		}
	}
	dirs, err := os.ReadDir(filepath.Join(dataDir, "builds"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("import template builds: %w", err)
	}
	for _, d := range dirs {
		if d.IsDir() {
			if err := r.importBuilds(ctx, filepath.Join(dataDir, "builds", d.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Registry) importVersions(ctx context.Context, file string) error {
	name := filepath.Base(filepath.Dir(file))
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("import versions of %s: %w", name, err)
	}
	var vs []pandastack.TemplateVersion
	if err := json.Unmarshal(data, &vs); err != nil {
		return fmt.Errorf("import versions of %s: %s: %w", name, file, err)
	}
	// What the old store knew of the current build: its accelerator and
	// build time, which versions.json does not keep.
	cur, err := r.cfg.Store.GetTemplate(ctx, "", name)
	if err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		return fmt.Errorf("import versions of %s: %w", name, err)
	}
	if cur.Accel == "" {
		cur.Accel = pandastack.AccelTCG
	}
	if len(vs) > 0 {
		if err := r.cfg.Store.DeleteTemplate(ctx, "", name); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
			return fmt.Errorf("import versions of %s: %w", name, err)
		}
	}
	for _, v := range vs {
		t := pandastack.Template{Name: name, ID: v.ID, Version: v.Version, CPUs: v.CPUs, MemoryMiB: v.MemoryMiB,
			DiskMiB: v.DiskMiB, Accel: cur.Accel, BuiltAt: v.BuiltAt}
		if v.ID == cur.ID {
			t.BuildMs, t.Dir = cur.BuildMs, cur.Dir
		}
		if _, err := r.cfg.Store.AddTemplateVersion(ctx, t, v.BuildID, ""); err != nil {
			return fmt.Errorf("import version %d of %s: %w", v.Version, name, err)
		}
		for _, tag := range v.Tags {
			if tag == LatestTag {
				continue
			}
			if _, err := r.cfg.Store.AddTemplateVersion(ctx, t, v.BuildID, tag); err != nil {
				return fmt.Errorf("import tag %s of %s: %w", tag, name, err)
			}
		}
	}
	if err := os.Rename(file, file+".imported"); err != nil {
		return fmt.Errorf("import versions of %s: %w", name, err)
	}
	r.log.Info("imported template versions into the store", "template", name, "versions", len(vs))
	return nil
}

func (r *Registry) importBuilds(ctx context.Context, dir string) error {
	name := filepath.Base(dir)
	recs, err := filepath.Glob(filepath.Join(dir, "bld_*.json"))
	if err != nil {
		return fmt.Errorf("import builds of %s: %w", name, err)
	}
	if err := os.MkdirAll(r.cfg.LogDir, 0o755); err != nil {
		return fmt.Errorf("import builds of %s: %w", name, err)
	}
	for _, f := range recs {
		id := strings.TrimSuffix(filepath.Base(f), ".json")
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("import build %s: %w", id, err)
		}
		var b pandastack.TemplateBuild
		if err := json.Unmarshal(data, &b); err != nil || b.ID != id {
			r.log.Warn("skipping an unreadable build record", "file", f, "err", err)
			continue
		}
		b.TeamID, b.Name = "", name
		if b.Steps == nil {
			b.Steps = []pandastack.BuildStep{}
		}
		if err := r.cfg.Store.PutTemplateBuild(ctx, b); err != nil {
			return fmt.Errorf("import build %s: %w", id, err)
		}
		if err := os.Rename(filepath.Join(dir, id+".log"), r.logPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("import log of build %s: %w", id, err)
		}
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("import build %s: %w", id, err)
		}
	}
	_ = os.Remove(dir) // only when empty
	if len(recs) > 0 {
		r.log.Info("imported template builds into the store", "template", name, "builds", len(recs))
	}
	return nil
}
