package hostagent

import (
	"context"
	"maps"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Sizer is implemented by template sources that bake (once) a template at
// another size than its own.
type Sizer interface {
	SizedSnapshot(ctx context.Context, ref string, cpus, memMiB, diskGiB int) (vmm.Snapshot, pandastack.Template, error)
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
func (a *Agent) templateSnapshot(ctx context.Context, req hostapi.MachineSpec) (vmm.Snapshot, pandastack.Template, error) {
	if req.CPUs != 0 || req.MemoryMiB != 0 || req.DiskGiB != 0 {
		sz, ok := a.cfg.Templates.(Sizer)
		if !ok {
			return vmm.Snapshot{}, pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "this host cannot change a template's size")
		}
		return sz.SizedSnapshot(ctx, req.Template, req.CPUs, req.MemoryMiB, req.DiskGiB)
	}
	return a.cfg.Templates.Snapshot(ctx, req.Template)
}

// templateDefaults applies the template's command defaults, captured on
// the sandbox's record at create, to its session; the env the sandbox was
// created with wins over the template's. A record from before defaults were
// captured has them looked up once, from the template's build.
func (a *Agent) templateDefaults(ctx context.Context, g *guest, s *sandbox) {
	d := s.rec.Defaults
	if d == nil {
		d = &pandastack.CommandDefaults{}
		if _, t, err := a.cfg.Templates.Snapshot(ctx, templateRef(s.rec.Template, s.rec.TemplateID)); err == nil {
			d = &t.Defaults
		}
		s.rec.Defaults = d
	}
	applyDefaults(g, *d)
}

func applyDefaults(g *guest, d pandastack.CommandDefaults) {
	if len(d.Env) > 0 {
		merged := maps.Clone(d.Env)
		maps.Copy(merged, g.env)
		g.env = merged
	}
	g.workdir, g.user = d.Workdir, d.User
}
