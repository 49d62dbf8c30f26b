package hostagent

import (
	"context"
	"maps"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Sizer is implemented by template sources that bake (once) a template at
// another size than its own.
type Sizer interface {
	SizedSnapshot(ctx context.Context, ref string, cpus, memMiB, diskGiB int) (vmm.Snapshot, pandastack.Template, error)
}

// Defaulter is implemented by template sources whose templates set the
// environment, working directory and user of every command (a custom
// template's ENV, WORKDIR and USER).
type Defaulter interface {
	Defaults(name, id string) (env map[string]string, workdir, user string)
}

// templateRef names the exact template build a sandbox came from, so a
// rebuild of the template does not change what its forks, wakes and
// snapshots restore onto.
func templateRef(name, id string) string {
	if id == "" {
		return name
	}
	return name + "@" + id
}

// templateSnapshot finds what a create restores: the template's build, or
// its variant at the size asked for.
func (a *Agent) templateSnapshot(ctx context.Context, req pandastack.CreateRequest) (vmm.Snapshot, pandastack.Template, error) {
	if req.CPUs != 0 || req.MemoryMiB != 0 || req.DiskGiB != 0 {
		sz, ok := a.cfg.Templates.(Sizer)
		if !ok {
			return vmm.Snapshot{}, pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "this host cannot change a template's size")
		}
		return sz.SizedSnapshot(ctx, req.Template, req.CPUs, req.MemoryMiB, req.DiskGiB)
	}
	return a.cfg.Templates.Snapshot(ctx, req.Template)
}

// templateDefaults applies the template's defaults to a sandbox's session;
// the env the sandbox was created with wins over the template's.
func (a *Agent) templateDefaults(g *guest, rec pandastack.Sandbox) {
	d, ok := a.cfg.Templates.(Defaulter)
	if !ok {
		return
	}
	env, wd, user := d.Defaults(rec.Template, rec.TemplateID)
	if len(env) > 0 {
		merged := maps.Clone(env)
		maps.Copy(merged, g.env)
		g.env = merged
	}
	g.workdir, g.user = wd, user
}
