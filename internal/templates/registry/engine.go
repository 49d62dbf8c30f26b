package registry

import (
	"context"

	"github.com/pandastack/pandastack"
)

// Engine is the control plane's side of a create: it resolves the
// request's template reference within the team, then the public catalog
// (Resolve), and hands the engine it wraps the exact build ("name@ID") and
// its version. Hosts never see a team's name for a template, and another
// team's template answers like a missing one. Every other method is the
// wrapped engine's.
type Engine struct {
	pandastack.Engine
	Registry *Registry
}

// Create resolves the template reference of a create from a template (one
// from a snapshot restores the snapshot's exact build) and creates.
func (e Engine) Create(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	if req.Snapshot == "" {
		t, err := e.Registry.Resolve(ctx, req.TeamID, req.Template)
		if err != nil {
			return pandastack.Sandbox{}, err
		}
		req.Template, req.TemplateVersion = t.Name+"@"+t.ID, t.Version
	}
	return e.Engine.Create(ctx, req)
}
