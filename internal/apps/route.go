package apps

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

// target is the release machine a backend dials.
type target struct {
	machine string
	port    int
}

// backend is an app route's backend: it dials whichever release is live,
// so a deploy or rollback switches traffic by one atomic store, with no
// moment without a route.
type backend struct {
	ports router.Ports
	name  string
	live  atomic.Pointer[target]
	// gen counts switches: a release kept warm for rollback hibernates at
	// the end of its window only if no switch happened since.
	gen atomic.Uint64
}

// set switches the backend to machine and returns the new generation.
func (b *backend) set(machine string, port int) uint64 {
	b.live.Store(&target{machine: machine, port: port})
	return b.gen.Add(1)
}

// current is the live machine ("" when none).
func (b *backend) current() string {
	if t := b.live.Load(); t != nil {
		return t.machine
	}
	return ""
}

// Dial connects to the live release's port (waking it when hibernated).
func (b *backend) Dial(ctx context.Context) (net.Conn, error) {
	t := b.live.Load()
	if t == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "app %s has no live release yet: deploy it (POST /v1/apps/%s/deploys)", b.name, b.name)
	}
	return b.ports.Port(t.machine, t.port).Dial(ctx)
}

// register routes the app's host to a new backend; nil when the host is
// taken.
func (s *Service) register(a App) *backend {
	return s.registerHost(a.ID, s.host(a.Name), a.Name)
}

// registerHost routes host to a new backend kept under key (an app id,
// or a preview's previewKey); nil when the host is taken.
func (s *Service) registerHost(key, host, name string) *backend {
	b := &backend{ports: s.cfg.Ports, name: name}
	if err := s.cfg.Routes.Register(router.Route{Host: host, Kind: router.HTTP, Backend: b,
		Access: router.Access{Public: true}}); err != nil {
		return nil
	}
	s.mu.Lock()
	s.backends[key] = b
	s.mu.Unlock()
	return b
}

func (s *Service) unregister(a App) {
	s.cfg.Routes.Unregister(s.host(a.Name))
	s.mu.Lock()
	delete(s.backends, a.ID)
	s.mu.Unlock()
}

// backendOf is the backend kept under key (an app id or a previewKey).
func (s *Service) backendOf(appID string) *backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backends[appID]
}
