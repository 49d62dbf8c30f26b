package router_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/router"
)

// sandboxes stands in for the store and the engine: each sandbox's ports
// are real servers on the host's loopback, dialled as the guest agent
// dials a guest port.
type sandboxes struct {
	mu    sync.Mutex
	recs  map[string]pandastack.Sandbox
	ports map[string]map[int]string // id → port → loopback address
	pol   map[string]pandastack.NetworkPolicy
	dials int
}

func newSandboxes() *sandboxes {
	return &sandboxes{recs: map[string]pandastack.Sandbox{}, ports: map[string]map[int]string{}, pol: map[string]pandastack.NetworkPolicy{}}
}

func (s *sandboxes) add(id, team string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[id] = pandastack.Sandbox{ID: id, TeamID: team, State: pandastack.StateRunning}
	s.ports[id] = map[int]string{}
}

// listen serves h on a loopback port that stands for port in sandbox id.
func (s *sandboxes) listen(t *testing.T, id string, port int, h http.Handler) {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.mu.Lock()
	s.ports[id][port] = srv.Listener.Addr().String()
	s.mu.Unlock()
}

func (s *sandboxes) dialCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dials
}

func (s *sandboxes) GetSandbox(_ context.Context, id string) (pandastack.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.recs[id]
	if !ok {
		return sb, pandastack.Errorf(pandastack.ENotFound, "sandbox %s not found", id)
	}
	return sb, nil
}

func (s *sandboxes) Policy(id string) pandastack.NetworkPolicy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pol[id]
}

func (s *sandboxes) Guest(_ context.Context, id string) (pandastack.Guest, error) {
	if _, err := s.GetSandbox(context.Background(), id); err != nil {
		return nil, err
	}
	return guest{s: s, id: id}, nil
}

// guest implements DialPort only: the router uses nothing else.
type guest struct {
	pandastack.Guest
	s  *sandboxes
	id string
}

func (g guest) DialPort(ctx context.Context, port int) (net.Conn, error) {
	g.s.mu.Lock()
	addr, ok := g.s.ports[g.id][port]
	g.s.dials++
	g.s.mu.Unlock()
	if !ok {
		return nil, pandastack.Errorf(pandastack.ERefused, "nothing listens on port %d", port)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// keys maps API keys to teams, as the API's key check does.
var keys = map[string]string{"key-acme": "team_acme", "key-globex": "team_globex"}

func authenticate(r *http.Request) (string, error) {
	k := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if k == "" {
		return "", pandastack.Errorf(pandastack.EUnauthorized, "missing API key")
	}
	team, ok := keys[k]
	if !ok {
		return "", pandastack.Errorf(pandastack.EUnauthorized, "invalid API key")
	}
	return team, nil
}

// front serves hosts the router owns and answers "api" for the rest,
// writing errors as the API does.
func front(h *router.HTTPRouter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served, err := h.ServeHost(w, r, authenticate)
		if err != nil {
			code := pandastack.ErrorCode(err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(api.StatusForCode(code))
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": pandastack.ErrorMessage(err)}})
		}
		if !served {
			fmt.Fprint(w, "api")
		}
	})
}

// echo answers with what the backend received.
func echo(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s auth=%q cookie=%q", name, r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("Cookie"))
	})
}
