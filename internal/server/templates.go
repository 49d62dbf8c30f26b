package server

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/pandastack/pandastack/internal/templates"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// openRegistry makes the template registry over the store and the builder,
// and imports a data dir's registry from the old host-file layout (once).
func (s *Server) openRegistry(ctx context.Context) error {
	s.registry = registry.New(registry.Config{Store: s.store, Builder: s.builder, LogDir: filepath.Join(s.cfg.DataDir, "builds"),
		MaxBuildsPerTeam: s.cfg.MaxBuildsPerTeam, Quotas: s.quotas, Catalog: slices.Sorted(maps.Keys(templates.Catalog)), Logger: s.log})
	s.builder.UseRefs(s.registry)
	if err := s.registry.Import(ctx, s.cfg.DataDir); err != nil {
		return fmt.Errorf("import template registry: %w", err)
	}
	return nil
}
