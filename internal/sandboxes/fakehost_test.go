package sandboxes_test

import (
	"context"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// fakeHost is a hostapi.Host whose answers a test sets: it starts no VMs.
// Machines it creates run until killed; events are sent by the test.
type fakeHost struct {
	mu       sync.Mutex
	inv      hostapi.Inventory
	machines map[string]hostapi.Machine
	adopt    map[string]bool // ids Adopt takes back
	adopted  []string
	settled  *hostapi.SettleRequest
	events   chan hostapi.Event
	// onCreate, when set, runs before Create returns (to send an event
	// that overtakes the result).
	onCreate func(m hostapi.Machine)
	// createErr, when set, is what Create answers for spec.
	createErr func(spec hostapi.MachineSpec) error
}

var _ hostapi.Host = (*fakeHost)(nil)

func newFakeHost() *fakeHost {
	return &fakeHost{machines: map[string]hostapi.Machine{}, adopt: map[string]bool{}, events: make(chan hostapi.Event, 16)}
}

func (h *fakeHost) Name() string            { return "local" }
func (h *fakeHost) Accel() pandastack.Accel { return pandastack.AccelTCG }

func (h *fakeHost) Inventory(ctx context.Context) (hostapi.Inventory, error) { return h.inv, nil }

func (h *fakeHost) Adopt(ctx context.Context, m hostapi.Machine) (hostapi.Machine, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.adopt[m.ID] {
		return m, hostapi.Unknown(m.ID)
	}
	h.adopted = append(h.adopted, m.ID)
	m.Seq++
	h.machines[m.ID] = m
	return m, nil
}

func (h *fakeHost) Settle(ctx context.Context, req hostapi.SettleRequest) error {
	h.mu.Lock()
	h.settled = &req
	h.mu.Unlock()
	return nil
}

func (h *fakeHost) List(ctx context.Context) ([]hostapi.Machine, error) { return nil, nil }

func (h *fakeHost) Create(ctx context.Context, spec hostapi.MachineSpec) (hostapi.Machine, error) {
	if h.createErr != nil {
		if err := h.createErr(spec); err != nil {
			return hostapi.Machine{}, err
		}
	}
	now := time.Now().UTC()
	m := hostapi.Machine{ID: spec.ID, Host: h.Name(), State: pandastack.StateRunning, Template: spec.Template, TemplateID: "tpl_1",
		CPUs: 1, MemoryMiB: 128, CreatedAt: now, ExpiresAt: spec.Lifetime.Expiry(now, spec.TTL), Lifetime: spec.Lifetime,
		Volumes: spec.Volumes, Seq: 1}
	h.mu.Lock()
	h.machines[m.ID] = m
	h.mu.Unlock()
	if h.onCreate != nil {
		h.onCreate(m)
	}
	return m, nil
}

func (h *fakeHost) Fork(ctx context.Context, req hostapi.ForkRequest) ([]hostapi.Machine, error) {
	return nil, pandastack.Errorf(pandastack.EUnavailable, "no forks here")
}

func (h *fakeHost) change(id string, f func(*hostapi.Machine)) (hostapi.Machine, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.machines[id]
	if !ok {
		return m, hostapi.Unknown(id)
	}
	f(&m)
	m.Seq++
	h.machines[id] = m
	return m, nil
}

func (h *fakeHost) Hibernate(ctx context.Context, id string) (hostapi.Machine, error) {
	return h.change(id, func(m *hostapi.Machine) { m.State = pandastack.StateHibernated })
}

func (h *fakeHost) Wake(ctx context.Context, id string) (hostapi.Machine, error) {
	return h.change(id, func(m *hostapi.Machine) { m.State = pandastack.StateRunning })
}

func (h *fakeHost) SetDeadline(ctx context.Context, req hostapi.DeadlineRequest) (hostapi.Machine, error) {
	return h.change(req.ID, func(m *hostapi.Machine) { m.ExpiresAt = req.ExpiresAt })
}

func (h *fakeHost) Snapshot(ctx context.Context, req hostapi.SnapshotRequest) (hostapi.SnapshotInfo, error) {
	return hostapi.SnapshotInfo{}, pandastack.Errorf(pandastack.EUnavailable, "no snapshots here")
}

func (h *fakeHost) DeleteSnapshot(ctx context.Context, id string) error { return nil }

func (h *fakeHost) Kill(ctx context.Context, req hostapi.KillRequest) (hostapi.Machine, error) {
	m, err := h.change(req.ID, func(m *hostapi.Machine) {
		now := time.Now().UTC()
		m.State, m.EndedAt, m.EndReason = req.State, &now, string(req.State)
	})
	if err == nil {
		h.mu.Lock()
		delete(h.machines, req.ID)
		h.mu.Unlock()
	}
	return m, err
}

func (h *fakeHost) Guest(ctx context.Context, id string) (pandastack.Guest, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.machines[id]; !ok {
		return nil, hostapi.Unknown(id)
	}
	return nil, nil
}

func (h *fakeHost) CreateVolume(ctx context.Context, spec hostapi.VolumeSpec) error { return nil }
func (h *fakeHost) DeleteVolume(ctx context.Context, id string) error               { return nil }

func (h *fakeHost) Events(ctx context.Context) <-chan hostapi.Event { return h.events }

// end reports, as an event, that machine id ended on its own.
func (h *fakeHost) end(id string, kind hostapi.EventKind, state pandastack.SandboxState, why string) hostapi.Machine {
	m, _ := h.change(id, func(m *hostapi.Machine) {
		now := time.Now().UTC()
		m.State, m.EndedAt, m.EndReason = state, &now, why
	})
	h.mu.Lock()
	delete(h.machines, id)
	h.mu.Unlock()
	h.events <- hostapi.Event{Kind: kind, Machine: m}
	return m
}
