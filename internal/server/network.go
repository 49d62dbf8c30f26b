package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/router"
)

// openNetwork starts sandbox networking when the server can (root) and
// was not told not to.
func openNetwork(ctx context.Context, cfg Config) (*network.Manager, error) {
	if cfg.NoNetwork {
		return nil, nil
	}
	if os.Getuid() != 0 {
		cfg.Logger.Warn("not running as root: sandboxes get no network")
		return nil, nil
	}
	ncfg := network.Config{DataDir: cfg.DataDir, Upstreams: cfg.DNSUpstreams, Logger: cfg.Logger,
		EgressDefaultDeny: cfg.EgressDefaultDeny}
	if cfg.NetworkPool != "" {
		p, err := netip.ParsePrefix(cfg.NetworkPool)
		if err != nil {
			return nil, fmt.Errorf("--network-pool: %w", err)
		}
		ncfg.Pool = p
	}
	m, err := network.New(ctx, ncfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox networking (run with --no-network to do without): %w", err)
	}
	return m, nil
}

func (s *Server) closeNetwork() {
	if s.net != nil {
		s.net.Close()
	}
}

// apiNetwork is the network settings the API serves (nil interface when
// networking is off).
func (s *Server) apiNetwork() api.Network {
	if s.net == nil {
		return nil
	}
	return s.net
}

// loadProxySecret reads (or makes) the key signed port URLs are signed
// with, so URLs stay valid across restarts.
func loadProxySecret(dataDir string) ([]byte, error) {
	p := filepath.Join(dataDir, "proxy-secret")
	b, err := os.ReadFile(p)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read proxy secret: %w", err)
	}
	b = make([]byte, 32)
	_, _ = rand.Read(b)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		return nil, fmt.Errorf("write proxy secret: %w", err)
	}
	return b, nil
}

// routerPolicies is the network policies the router reads public ports
// from (nil interface when networking is off).
func (s *Server) routerPolicies() router.Policies {
	if s.net == nil {
		return nil
	}
	return s.net
}
