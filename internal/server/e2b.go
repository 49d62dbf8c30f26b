package server

import (
	"github.com/pandastack/pandastack/internal/e2bcompat"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// e2bServer serves E2B's wire protocol on the API's port, over the same
// engine (templates resolved by the registry), quotas and sandbox domain.
// Access tokens derive from the proxy secret.
func (s *Server) e2bServer() *e2bcompat.Server {
	var nw e2bcompat.Network
	if s.net != nil {
		nw = s.net
	}
	return e2bcompat.New(e2bcompat.Config{Store: s.store, Engine: registry.Engine{Engine: s.engine, Registry: s.registry},
		Quotas: s.quotas, Logger: s.log, Secret: s.proxySecret, Domain: s.cfg.SandboxDomain, Network: nw})
}
