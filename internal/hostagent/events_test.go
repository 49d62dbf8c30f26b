package hostagent

import (
	"context"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// bareAgent starts an agent on h's driver and directories with nobody
// draining its events: the test reads them.
func bareAgent(t *testing.T, h *testHost) *Agent {
	t.Helper()
	h.stop()
	a := New(h.cfg)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(context.Background(), hostapi.SettleRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background(), false) })
	return a
}

// next is the next event the agent reports.
func next(t *testing.T, a *Agent) hostapi.Event {
	t.Helper()
	select {
	case ev := <-a.Events(context.Background()):
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no event from the host")
		return hostapi.Event{}
	}
}

// What happens to a machine without a request is reported as an event
// carrying the machine as it is now: a VM that dies on its own (exited,
// failed with the reason), a deadline that passes (expired), an idle
// machine the host hibernates (hibernated, idle), and a kill (ended).
// Each change is numbered higher than the last.
func TestHostReportsEvents(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	a := bareAgent(t, h)
	ctx := context.Background()
	spec := func(id string, ttl time.Duration, idle int) hostapi.MachineSpec {
		return hostapi.MachineSpec{ID: id, Template: testTemplate, TTL: ttl, AutoHibernateSeconds: idle}
	}

	crash, err := a.Create(ctx, spec("sbx_crash", time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	h.drv.VM(crash.ID).Crash()
	ev := next(t, a)
	if ev.Kind != hostapi.EventExited || ev.Machine.ID != crash.ID || ev.Machine.State != pandastack.StateFailed ||
		ev.Machine.EndReason != "the VM process exited" || ev.Machine.Seq <= crash.Seq {
		t.Fatalf("after a crash: %+v", ev)
	}

	short, err := a.Create(ctx, spec("sbx_short", time.Millisecond, 0))
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, a); ev.Kind != hostapi.EventExpired || ev.Machine.ID != short.ID || ev.Machine.State != pandastack.StateExpired {
		t.Fatalf("after the deadline: %+v", ev)
	}

	idle, err := a.Create(ctx, spec("sbx_idle", time.Hour, 1))
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, a); ev.Kind != hostapi.EventHibernated || !ev.Idle || ev.Machine.ID != idle.ID || ev.Machine.State != pandastack.StateHibernated {
		t.Fatalf("after the idle time: %+v", ev)
	}

	m, err := a.Kill(ctx, hostapi.KillRequest{ID: idle.ID, State: pandastack.StateKilled})
	if err != nil || m.State != pandastack.StateKilled {
		t.Fatalf("kill: %+v %v", m, err)
	}
	if ev := next(t, a); ev.Kind != hostapi.EventEnded || ev.Machine.ID != idle.ID || ev.Machine.Seq != m.Seq {
		t.Fatalf("after a kill: %+v", ev)
	}
}
