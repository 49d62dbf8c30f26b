package hostagent

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/store/sqlite"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/vmmtest"
)

// testHost is a host agent over the fake VMM driver (files, and the real
// guest agent on each VM's socket) and an in-memory network, driven the
// way the server drives it: through the sandboxes engine, which keeps the
// records in a real SQLite store. Its logic runs under go test, without
// root or QEMU.
type testHost struct {
	t     *testing.T
	store *sqlite.Store
	drv   *vmmtest.Driver
	net   *memNetwork
	cfg   Config
	a     *Agent
	e     *sandboxes.Engine
}

// testTemplate is the one template a testHost restores.
const testTemplate = "base"

func newTestHost(t *testing.T) *testHost {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	snap, err := vmmtest.Template(filepath.Join(t.TempDir(), "tpl"), vmm.Machine{CPUs: 1, MemoryMiB: 64, VolumeSlots: vmm.VolumeSlots})
	if err != nil {
		t.Fatal(err)
	}
	h := &testHost{t: t, store: st, drv: vmmtest.New(t), net: newMemNetwork()}
	h.cfg = Config{Driver: h.drv, Templates: fixedTemplates{snap: snap},
		HibernateDir: t.TempDir(), SnapshotDir: t.TempDir(), Network: h.net, ReadyTimeout: 20 * time.Second,
		StateDir: filepath.Join(t.TempDir(), "machines")}
	h.start()
	return h
}

// start starts a new Agent on the host's driver and directories, and an
// engine over it and the store, as a restarted server would.
func (h *testHost) start() *Agent {
	h.t.Helper()
	h.a = New(h.cfg)
	if err := h.a.Start(context.Background()); err != nil {
		h.t.Fatalf("start agent: %v", err)
	}
	a := h.a
	h.e = sandboxes.NewEngine(sandboxes.EngineConfig{Store: h.store, Host: a})
	if err := h.e.Start(context.Background()); err != nil {
		h.t.Fatalf("start engine: %v", err)
	}
	e := h.e
	h.t.Cleanup(func() {
		_ = a.Close(context.Background(), false)
		e.Wait()
	})
	return a
}

// stop stops the agent without ending its sandboxes, once the engine has
// recorded what it reported.
func (h *testHost) stop() {
	h.t.Helper()
	if err := h.a.Close(context.Background(), false); err != nil {
		h.t.Fatalf("close agent: %v", err)
	}
	h.e.Wait()
}

// restart stops the agent without ending its sandboxes and starts another.
func (h *testHost) restart() *Agent {
	h.t.Helper()
	h.stop()
	return h.start()
}

// create makes a sandbox of team_1 from the template.
func (h *testHost) create(req pandastack.CreateRequest) pandastack.Sandbox {
	h.t.Helper()
	if req.TeamID == "" {
		req.TeamID = "team_1"
	}
	if req.Template == "" {
		req.Template = testTemplate
	}
	if req.TTL == 0 {
		req.TTL = time.Hour
	}
	rec, err := h.e.Create(context.Background(), req)
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
	return rec
}

// exec runs cmd in sandbox id through the agent and returns its stdout.
func (h *testHost) exec(id, cmd string) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g, err := h.e.Guest(ctx, id)
	if err != nil {
		h.t.Fatalf("guest of %s: %v", id, err)
	}
	var out bytes.Buffer
	res, err := g.Exec(ctx, pandastack.ExecRequest{Cmd: cmd}, nil, func(e pandastack.ExecEvent) error {
		if e.Type == "stdout" {
			out.Write(e.Data)
		}
		return nil
	})
	if err != nil || res.ExitCode != 0 {
		h.t.Fatalf("exec %q in %s: %v (exit %d)", cmd, id, err, res.ExitCode)
	}
	return out.String()
}

// record is sandbox id's record in the store.
func (h *testHost) record(id string) pandastack.Sandbox {
	h.t.Helper()
	rec, err := h.store.GetSandbox(context.Background(), id)
	if err != nil {
		h.t.Fatalf("get %s: %v", id, err)
	}
	return rec
}

// waitState waits until sandbox id's record is in state want.
func (h *testHost) waitState(id string, want pandastack.SandboxState) pandastack.Sandbox {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec := h.record(id)
		if rec.State == want {
			return rec
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("sandbox %s is %s (%s), want %s", id, rec.State, rec.EndReason, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fixedTemplates serves one snapshot for every template name.
type fixedTemplates struct{ snap vmm.Snapshot }

func (f fixedTemplates) Snapshot(ctx context.Context, name string) (vmm.Snapshot, pandastack.Template, error) {
	return f.snap, pandastack.Template{Name: testTemplate, ID: "tpl_1", CPUs: f.snap.Machine.CPUs, MemoryMiB: f.snap.Machine.MemoryMiB}, nil
}

// memNetwork keeps policies in memory (internal/network needs root).
type memNetwork struct {
	mu       sync.Mutex
	policies map[string]pandastack.NetworkPolicy
}

func newMemNetwork() *memNetwork { return &memNetwork{policies: map[string]pandastack.NetworkPolicy{}} }

func (n *memNetwork) SetPolicy(ctx context.Context, id string, p pandastack.NetworkPolicy) (pandastack.NetworkPolicy, error) {
	p, err := p.Normalize()
	if err != nil {
		return p, err
	}
	n.mu.Lock()
	n.policies[id] = p
	n.mu.Unlock()
	return p, nil
}

func (n *memNetwork) Policy(id string) pandastack.NetworkPolicy {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.policies[id]; ok {
		return p
	}
	return pandastack.NetworkPolicy{Egress: pandastack.EgressAllow}
}

func (n *memNetwork) Forget(id string) {
	n.mu.Lock()
	delete(n.policies, id)
	n.mu.Unlock()
}

func (n *memNetwork) Reconcile(ctx context.Context, running, known []string) error { return nil }
