package server

import (
	"context"
	"net"
	"path/filepath"

	"github.com/pandastack/pandastack/internal/apps"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// openApps starts app hosting: apps are served at NAME.apps.DOMAIN on
// the API's port, their builds and releases are the team's sandboxes
// (counted against its quotas), through the engine that installs the
// extra CA certificates.
func (s *Server) openApps(ctx context.Context) {
	engine := s.sandboxEngine()
	machines := sandboxes.New(sandboxes.Config{Store: s.store, Engine: registry.Engine{Engine: engine, Registry: s.registry},
		Logger: s.log, Quotas: s.quotas})
	s.apps = apps.New(apps.Config{Store: s.store, Machines: machines, Engine: engine, Secrets: s.secrets, Routes: s.routes,
		Ports:  s.portDialer(engine, "apps"),
		Domain: s.domain(), URLPort: urlPort(s.cfg.Listen), WorkDir: filepath.Join(s.cfg.DataDir, "apps"), Git: apps.GitGuard{Allow: s.cfg.GitAllow},
		RollbackWindow: s.cfg.AppRollbackWindow, Quotas: s.quotas, Logger: s.log})
	// Dependency caches and git repositories count in max_disk_gib.
	s.quotas.AddCounter(s.apps.DiskUsage)
	if err := s.apps.Start(ctx); err != nil {
		s.log.Error("apps: restore routes", "err", err)
	}
}

// urlPort is ":PORT" of a listen address, or "" for port 80 or none.
func urlPort(listen string) string {
	_, port, err := net.SplitHostPort(listen)
	if err != nil || port == "80" || port == "0" || port == "" {
		return ""
	}
	return ":" + port
}
