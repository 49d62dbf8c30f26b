package templates

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Template versions: DATA/templates/NAME/versions.json lists every build of
// NAME that was ever current, numbered from 1, with its tags. A build's
// directory (DATA/templates/NAME/ID) is never removed while listed, so
// sandboxes, forks, hibernated sandboxes and snapshots made from an old
// version keep restoring after a rebuild.

// LatestTag always names the newest version.
const LatestTag = "latest"

func (b *Builder) versionsFile(name string) string {
	return filepath.Join(b.cfg.DataDir, "templates", name, "versions.json")
}

// Versions lists the versions of template name, oldest first.
func (b *Builder) Versions(ctx context.Context, name string) ([]pandastack.TemplateVersion, error) {
	vs, err := b.readVersions(name)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		// A template built before versions were recorded: its current build
		// is version 1.
		t, err := b.cfg.Store.GetTemplate(ctx, name)
		if err != nil {
			return nil, err
		}
		vs = []pandastack.TemplateVersion{versionOf(t, 1, nil, "")}
	}
	return vs, nil
}

func (b *Builder) readVersions(name string) ([]pandastack.TemplateVersion, error) {
	data, err := os.ReadFile(b.versionsFile(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read versions of %s: %w", name, err)
	}
	var vs []pandastack.TemplateVersion
	if err := json.Unmarshal(data, &vs); err != nil {
		return nil, fmt.Errorf("read versions of %s: %w", name, err)
	}
	return vs, nil
}

func versionOf(t pandastack.Template, n int, tags []string, buildID string) pandastack.TemplateVersion {
	return pandastack.TemplateVersion{Name: t.Name, Version: n, ID: t.ID, Tags: tags, CPUs: t.CPUs,
		MemoryMiB: t.MemoryMiB, DiskMiB: t.DiskMiB, BuildID: buildID, BuiltAt: t.BuiltAt}
}

// recordVersion makes build t the newest version of its template (or, when
// it is the newest already, only adds tag) and returns its number. The
// caller holds the template's lock.
func (b *Builder) recordVersion(t pandastack.Template, tag, buildID string) (int, error) {
	vs, err := b.readVersions(t.Name)
	if err != nil {
		return 0, err
	}
	if len(vs) > 0 && vs[len(vs)-1].ID == t.ID {
		last := &vs[len(vs)-1]
		if tag == "" || slices.Contains(last.Tags, tag) {
			return last.Version, nil
		}
	} else {
		n := 1
		if len(vs) > 0 {
			n = vs[len(vs)-1].Version + 1
		}
		vs = append(vs, versionOf(t, n, nil, buildID))
	}
	last := &vs[len(vs)-1]
	for _, tg := range []string{LatestTag, tag} {
		if tg == "" {
			continue
		}
		for i := range vs { // a tag names one version: move it
			vs[i].Tags = slices.DeleteFunc(vs[i].Tags, func(s string) bool { return s == tg })
		}
		last.Tags = append(last.Tags, tg)
	}
	for i := range vs {
		if vs[i].Tags == nil {
			vs[i].Tags = []string{}
		}
	}
	data, _ := json.MarshalIndent(vs, "", "  ")
	f := b.versionsFile(t.Name)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(f+".tmp", data, 0o644); err != nil {
		return 0, fmt.Errorf("record version: %w", err)
	}
	if err := os.Rename(f+".tmp", f); err != nil {
		return 0, fmt.Errorf("record version: %w", err)
	}
	return last.Version, nil
}

// ParseRef splits a template reference: "name", "name:tag" (or "name:3",
// "name:v3" for a version number) or "name@ID" (an exact build).
func ParseRef(ref string) (name, tag, id string) {
	if n, i, ok := strings.Cut(ref, "@"); ok {
		return n, "", i
	}
	name, tag, _ = strings.Cut(ref, ":")
	return name, tag, ""
}

// resolve finds the build a reference names and its version number.
func (b *Builder) resolve(ctx context.Context, ref string) (name, id string, version int, err error) {
	name, tag, id := ParseRef(ref)
	if name == "" || strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") || strings.ContainsAny(id, "/\\.") || strings.ContainsAny(tag, "/\\") {
		return "", "", 0, pandastack.Errorf(pandastack.EInvalid, "invalid template reference %q", ref)
	}
	vs, err := b.readVersions(name)
	if err != nil {
		return "", "", 0, err
	}
	if id == "" && (tag == "" || tag == LatestTag) {
		t, err := b.cfg.Store.GetTemplate(ctx, name)
		if err != nil {
			if pandastack.ErrorCode(err) == pandastack.ENotFound {
				return "", "", 0, pandastack.Errorf(pandastack.ENotFound, "template %q not found: build it with `pandastack template build %s`", name, name)
			}
			return "", "", 0, err
		}
		id = t.ID
	}
	if id != "" {
		for _, v := range vs {
			if v.ID == id {
				return name, id, v.Version, nil
			}
		}
		if meta, err := readMeta(b.dir(name, id)); err == nil {
			return name, id, meta.Version, nil // a size variant
		}
		if _, err := os.Stat(filepath.Join(b.dir(name, id), "template.json")); err != nil {
			return "", "", 0, pandastack.Errorf(pandastack.ENotFound, "template %s has no build %s", name, id)
		}
		return name, id, 0, nil
	}
	n, numErr := strconv.Atoi(strings.TrimPrefix(tag, "v"))
	for _, v := range vs {
		if (numErr == nil && v.Version == n) || slices.Contains(v.Tags, tag) {
			return name, v.ID, v.Version, nil
		}
	}
	return "", "", 0, pandastack.Errorf(pandastack.ENotFound, "template %s has no version or tag %q", name, tag)
}

// Snapshot returns what to restore a template reference from (see
// ParseRef): "name" is the build the store names as current.
func (b *Builder) Snapshot(ctx context.Context, ref string) (vmm.Snapshot, pandastack.Template, error) {
	name, id, version, err := b.resolve(ctx, ref)
	if err != nil {
		return vmm.Snapshot{}, pandastack.Template{}, err
	}
	dir := b.dir(name, id)
	rec, err := readRecord(dir)
	if err != nil {
		return vmm.Snapshot{}, pandastack.Template{}, fmt.Errorf("read template %s: %w", ref, err)
	}
	t := rec.Template
	t.Version = version
	if t.DiskMiB == 0 {
		t.DiskMiB = b.diskMiB(ctx, rec.Disk)
	}
	snap := vmm.Saved(dir, rec.Machine)
	snap.Key = name + "/" + id
	return snap, t, nil
}

// diskMiB is the virtual size of a disk image (cached: images never change).
func (b *Builder) diskMiB(ctx context.Context, disk string) int {
	b.mu.Lock()
	n, ok := b.diskSizes[disk]
	b.mu.Unlock()
	if ok {
		return n
	}
	out, err := runOut(ctx, "qemu-img", "info", "--output=json", disk)
	if err != nil {
		return 0
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if json.Unmarshal(out, &info) != nil {
		return 0
	}
	n = int(info.VirtualSize >> 20)
	b.mu.Lock()
	if b.diskSizes == nil {
		b.diskSizes = map[string]int{}
	}
	b.diskSizes[disk] = n
	b.mu.Unlock()
	return n
}

// meta is meta.json in the directory of a custom build or a size variant:
// what the bake record does not say.
type meta struct {
	Version int    `json:"version,omitempty"`
	BaseID  string `json:"base_id,omitempty"` // for a size variant: the build it is a variant of
	Parent  string `json:"parent,omitempty"`  // for a custom build: the FROM template build
	// Defaults every command in a sandbox of this template starts with.
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	User    string            `json:"user,omitempty"`
	// Start runs in the background before the bake; Ready must exit 0
	// (retried until ReadyTimeout) before the VM is saved.
	Start        string        `json:"start,omitempty"`
	Ready        string        `json:"ready,omitempty"`
	ReadyTimeout time.Duration `json:"ready_timeout,omitempty"`
	// DiskGiB, when set, is a disk grown past the parent's: the root
	// filesystem is grown in the guest before the bake.
	DiskGiB int                    `json:"disk_gib,omitempty"`
	Steps   []pandastack.BuildStep `json:"steps,omitempty"`
}

func readMeta(dir string) (meta, error) {
	var m meta
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}

func writeMeta(dir string, m meta) error {
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "meta.json.tmp"), data, 0o644); err != nil {
		return err
	}
	return os.Rename(filepath.Join(dir, "meta.json.tmp"), filepath.Join(dir, "meta.json"))
}

// Defaults returns the environment, working directory and user every
// command in a sandbox of template build name@id starts with (set by a
// custom template's ENV, WORKDIR and USER).
func (b *Builder) Defaults(name, id string) (env map[string]string, workdir, user string) {
	m, err := readMeta(b.dir(name, id))
	if err != nil {
		return nil, "", ""
	}
	return m.Env, m.Workdir, m.User
}

// BuildInfo returns the version number and disk size (MiB) of template
// build name@id, as sandboxes made from it report them.
func (b *Builder) BuildInfo(ctx context.Context, name, id string) (version, diskMiB int) {
	_, _, version, err := b.resolve(ctx, name+"@"+id)
	if err != nil {
		return 0, 0
	}
	rec, err := readRecord(b.dir(name, id))
	if err != nil {
		return version, 0
	}
	return version, b.diskMiB(ctx, rec.Disk)
}
