package server

import (
	"context"
	"fmt"
	"time"

	"github.com/pandastack/pandastack"
)

// How often unused template size variants are looked for, and how long a
// variant is kept after it was baked or last handed out for a create.
const (
	variantGCEvery = 10 * time.Minute
	variantMinAge  = 30 * time.Minute
)

// collectVariants removes, every variantGCEvery until ctx ends, the
// template size variants no live sandbox or snapshot came from (they are
// baked again by the next create at their size).
func (s *Server) collectVariants(ctx context.Context) {
	t := time.NewTicker(variantGCEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		inUse, err := s.templateIDsInUse(ctx)
		if err != nil {
			s.log.Warn("collect size variants", "err", err)
			continue
		}
		removed, err := s.builder.CollectVariants(ctx, func(id string) bool { return inUse[id] }, variantMinAge)
		if err != nil {
			s.log.Warn("collect size variants", "err", err)
		}
		if len(removed) > 0 {
			s.log.Info("unused size variants removed", "variants", removed)
		}
	}
}

// templateIDsInUse is the template builds live sandboxes and snapshots
// (of every team) came from: a fork, wake or restore needs its build.
func (s *Server) templateIDsInUse(ctx context.Context) (map[string]bool, error) {
	ids := map[string]bool{}
	sbs, err := s.store.ListSandboxes(ctx, pandastack.SandboxFilter{LiveOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list live sandboxes: %w", err)
	}
	for _, sb := range sbs {
		ids[sb.TemplateID] = true
	}
	snaps, err := s.store.ListSnapshots(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	for _, sn := range snaps {
		ids[sn.TemplateID] = true
	}
	return ids, nil
}
