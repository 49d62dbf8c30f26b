package sandboxes_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// engine records creates into the store, as the host agent does; it can
// hold creates until release is closed.
type engine struct {
	pandastack.Engine
	store   pandastack.Store
	mu      sync.Mutex
	n       int
	release chan struct{}
}

func (e *engine) Create(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	if e.release != nil {
		<-e.release
	}
	e.mu.Lock()
	e.n++
	id := "sbx_" + strings.Repeat("x", e.n)
	e.mu.Unlock()
	now := time.Now().UTC()
	sb := pandastack.Sandbox{ID: id, TeamID: req.TeamID, Template: req.Template, State: pandastack.StateRunning,
		CreatedAt: now, ExpiresAt: req.Lifetime.Expiry(now, req.TTL), Lifetime: req.Lifetime}
	return sb, e.store.PutSandbox(ctx, sb)
}

// newService is a Service over a real SQLite store, with the quota
// limits given (nil fields of quotas.Limits: no limit).
func newService(t *testing.T, cfg sandboxes.Config, limits quotas.Limits) (*sandboxes.Service, *engine) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &engine{store: st}
	cfg.Store, cfg.Engine = st, e
	cfg.Quotas = quotas.New(quotas.Config{Store: st, Defaults: limits})
	return sandboxes.New(cfg), e
}

func i64(v int64) *int64 { return &v }

// A create is validated once, here: each rule answers invalid_argument
// with what is wrong; a valid one is turned into the engine's request,
// with the deadline its lifetime gives it.
func TestRequest(t *testing.T) {
	s, _ := newService(t, sandboxes.Config{}, quotas.Limits{})
	tests := []struct {
		name string
		p    sandboxes.CreateParams
		want string // error fragment; "" is valid
	}{
		{"template", sandboxes.CreateParams{Template: "base"}, ""},
		{"nothing to start from", sandboxes.CreateParams{}, "template is required"},
		{"service", sandboxes.CreateParams{Template: "base", Lifetime: "service"}, ""},
		{"service with a ttl", sandboxes.CreateParams{Template: "base", Lifetime: "service", TTLSeconds: i64(60)}, "a service machine has no TTL"},
		{"bad lifetime", sandboxes.CreateParams{Template: "base", Lifetime: "eternal"}, "lifetime must be"},
		{"ttl above max", sandboxes.CreateParams{Template: "base", TTLSeconds: i64(86401)}, "ttl_seconds must be between 1 and 86400"},
		{"idle negative", sandboxes.CreateParams{Template: "base", AutoHibernateSeconds: i64(-1)}, "auto_hibernate_seconds"},
		{"empty metadata key", sandboxes.CreateParams{Template: "base", Metadata: map[string]string{"": "x"}}, "metadata keys"},
		{"bad env", sandboxes.CreateParams{Template: "base", Env: map[string]string{"A=B": "x"}}, "env"},
		{"too many cpus", sandboxes.CreateParams{Template: "base", CPUs: 99}, "cpus must be between"},
		{"resize a snapshot", sandboxes.CreateParams{Snapshot: "snap_1", CPUs: 2}, "cannot be changed when starting from a snapshot"},
		{"volumes on a snapshot", sandboxes.CreateParams{Snapshot: "snap_1", Volumes: []pandastack.VolumeMount{{Volume: "v", Path: "/data"}}}, "volumes cannot be attached"},
		{"bad policy", sandboxes.CreateParams{Template: "base", Network: &pandastack.NetworkPolicy{Egress: "sometimes"}}, "egress must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := s.Request("team_1", tt.p)
			if tt.want != "" {
				if pandastack.ErrorCode(err) != pandastack.EInvalid || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want invalid with %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Lifetime.IsService() != (tt.p.Lifetime == "service") || req.Metadata == nil {
				t.Fatalf("request %+v", req)
			}
			if req.Lifetime.IsService() && req.TTL != 0 || !req.Lifetime.IsService() && req.TTL != sandboxes.DefaultTTL {
				t.Fatalf("TTL %v for lifetime %s", req.TTL, req.Lifetime)
			}
		})
	}
}

// Concurrent creates cannot together go over the team's cap on service
// machines: the ones in flight count.
func TestServiceCapCountsCreatesInFlight(t *testing.T) {
	s, e := newService(t, sandboxes.Config{}, quotas.Limits{MaxServiceMachines: 2})
	e.release = make(chan struct{})
	ctx := context.Background()
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := s.Create(ctx, "team_1", sandboxes.CreateParams{Template: "base", Lifetime: "service"})
			errs <- err
		}()
	}
	// One of the three is refused while the other two are in flight.
	if err := <-errs; pandastack.ErrorCode(err) != pandastack.EQuota {
		t.Fatalf("third concurrent create: %v, want quota_exceeded", err)
	}
	close(e.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, n, err := s.Machines(ctx, "team_1", false); err != nil || n != 2 {
		t.Fatalf("live service machines: %d %v", n, err)
	}
	// Sandboxes are not held by the service cap, and another team has its own.
	if _, err := s.Create(ctx, "team_1", sandboxes.CreateParams{Template: "base"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "team_2", sandboxes.CreateParams{Template: "base", Lifetime: "service"}); err != nil {
		t.Fatal(err)
	}
}
