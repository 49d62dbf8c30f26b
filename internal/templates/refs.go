package templates

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Template references: the registry (internal/templates/registry, in the
// store) names versions and tags; this host knows builds, one directory
// each (TemplateDir/NAME/ID), kept while anything may restore from them.
// An exact reference "name@ID" is found here; any other ("name",
// "name:TAG") is a public-catalog reference the Refs resolver turns into
// one. Team references are resolved by the control plane before they
// reach a host.

// Refs resolves a team's template reference to an exact build (implemented
// by registry.Registry).
type Refs interface {
	Resolve(ctx context.Context, teamID, ref string) (pandastack.Template, error)
}

// UseRefs sets the resolver of references that are not exact builds.
func (b *Builder) UseRefs(r Refs) { b.refs = r }

// resolve finds the build a reference names and its version number (0 for
// an exact reference: versions are the registry's).
func (b *Builder) resolve(ctx context.Context, ref string) (name, id string, version int, err error) {
	name, id, exact := strings.Cut(ref, "@")
	if !exact {
		if b.refs == nil {
			return "", "", 0, pandastack.Errorf(pandastack.ENotFound, "template %q not found", ref)
		}
		t, err := b.refs.Resolve(ctx, "", ref)
		if err != nil {
			return "", "", 0, err
		}
		name, id, version = t.Name, t.ID, t.Version
	}
	if !safeName(name) || !safeName(id) {
		return "", "", 0, pandastack.Errorf(pandastack.EInvalid, "invalid template reference %q", ref)
	}
	if _, err := os.Stat(filepath.Join(b.dir(name, id), "template.json")); err != nil {
		return "", "", 0, pandastack.Errorf(pandastack.ENotFound, "template %s has no build %s on this host", name, id)
	}
	return name, id, version, nil
}

// safeName is a path element that stays in its directory.
func safeName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/\\") && !strings.HasPrefix(s, ".")
}

// Snapshot returns what to restore a template reference from, and the
// template with its command defaults: "name@ID" is that build, any other
// reference what the Refs resolver names in the public catalog.
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
	if m, err := readMeta(dir); err == nil {
		t.Defaults = pandastack.CommandDefaults{Env: m.Env, Workdir: m.Workdir, User: m.User}
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
	BaseID string `json:"base_id,omitempty"` // for a size variant: the build it is a variant of
	Parent string `json:"parent,omitempty"`  // for a custom build: the FROM template build
	// Defaults every command in a sandbox of this template starts with
	// (read once per create: sandboxes keep them on their record).
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

// DiskMiB returns the disk size (MiB) of template build name@id, as
// sandboxes made from it report it (0 when this host does not hold it).
func (b *Builder) DiskMiB(ctx context.Context, name, id string) int {
	if !safeName(name) || !safeName(id) {
		return 0
	}
	rec, err := readRecord(b.dir(name, id))
	if err != nil {
		return 0
	}
	return b.diskMiB(ctx, rec.Disk)
}
