package hostagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Every path that starts a VM — a create from a template, a create from a
// snapshot, a fork's children, a wake — hands the driver the sandbox's
// network policy with the restore, so it is in force before the guest
// runs its first instruction (a template's daemons run at once).
func TestEveryRestoreCarriesItsPolicy(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	deny := &pandastack.NetworkPolicy{Egress: pandastack.EgressDeny, AllowCIDRs: []string{"10.9.0.0/16"}}
	wantDeny := func(what string, i int) {
		t.Helper()
		rs := h.drv.Restores()
		if len(rs) <= i {
			t.Fatalf("%s: %d restores, want more than %d", what, len(rs), i)
		}
		got := rs[i].Options.Network
		if got.Egress != pandastack.EgressDeny || len(got.AllowCIDRs) != 1 || got.AllowCIDRs[0] != "10.9.0.0/16" {
			t.Fatalf("%s restored with policy %+v, want %+v", what, got, *deny)
		}
		if rs[i].Options.ID == "" || !strings.HasPrefix(rs[i].Options.ID, "sbx_") {
			t.Fatalf("%s restored as %q: the host agent names its sandboxes", what, rs[i].Options.ID)
		}
	}

	sbx := h.create(pandastack.CreateRequest{Network: deny})
	wantDeny("template create", 0)
	if got := h.drv.VM(sbx.ID); got == nil || got.Network().Egress != pandastack.EgressDeny {
		t.Fatalf("the sandbox's VM is not %s with its policy", sbx.ID)
	}

	kids, err := h.e.Fork(ctx, sbx.ID, 1)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	wantDeny("fork child", 1)
	if h.drv.Restores()[1].Options.ID != kids[0].ID {
		t.Fatalf("fork child restored as %s, recorded as %s", h.drv.Restores()[1].Options.ID, kids[0].ID)
	}

	sn, err := h.e.Snapshot(ctx, sbx.ID, "s1")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	h.create(pandastack.CreateRequest{Snapshot: sn.ID, Network: deny})
	wantDeny("snapshot restore", 2)

	if _, err := h.e.Hibernate(ctx, sbx.ID); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	if _, err := h.e.Wake(ctx, sbx.ID); err != nil {
		t.Fatalf("wake: %v", err)
	}
	wantDeny("wake", 3)
	if h.drv.Restores()[3].Options.ID != sbx.ID {
		t.Fatalf("woken as %s, want its own id %s", h.drv.Restores()[3].Options.ID, sbx.ID)
	}
}

// A sandbox runs commands through its guest agent; a kill ends its VM,
// removes its files and records why, and later calls answer gone.
func TestCreateExecKill(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	sbx := h.create(pandastack.CreateRequest{Env: map[string]string{"GREETING": "hello"}})
	if sbx.State != pandastack.StateRunning || h.record(sbx.ID).State != pandastack.StateRunning {
		t.Fatalf("new sandbox is %s", sbx.State)
	}
	if got := h.exec(sbx.ID, "echo $GREETING"); got != "hello\n" {
		t.Fatalf("exec: %q", got)
	}
	dir := h.drv.VM(sbx.ID).Dir()
	if err := h.e.Kill(ctx, sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if rec := h.record(sbx.ID); rec.State != pandastack.StateKilled || rec.EndedAt == nil {
		t.Fatalf("after kill: %+v", rec)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("vm dir after kill: %v", err)
	}
	if _, err := h.e.Guest(ctx, sbx.ID); pandastack.ErrorCode(err) != pandastack.EGone {
		t.Fatalf("guest of a killed sandbox: %v, want gone", err)
	}
	if err := h.e.Kill(ctx, sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("second kill: %v", err)
	}
}

// A hibernated sandbox has no VM; any use wakes it, under its own id.
func TestHibernateAndWakeOnUse(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	sbx := h.create(pandastack.CreateRequest{})
	if _, err := h.e.Hibernate(ctx, sbx.ID); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	if rec := h.record(sbx.ID); rec.State != pandastack.StateHibernated {
		t.Fatalf("after hibernate: %s", rec.State)
	}
	if len(h.drv.Running()) != 0 {
		t.Fatalf("VMs running after hibernate: %v", h.drv.Running())
	}
	if got := h.exec(sbx.ID, "echo awake"); got != "awake\n" {
		t.Fatalf("exec after hibernate: %q", got)
	}
	if rec := h.record(sbx.ID); rec.State != pandastack.StateRunning {
		t.Fatalf("after use: %s", rec.State)
	}
	if ents, _ := os.ReadDir(h.cfg.HibernateDir); len(ents) != 0 {
		h.a.bg.Wait()
		if ents, _ := os.ReadDir(h.cfg.HibernateDir); len(ents) != 0 {
			t.Fatalf("hibernation files left after the wake: %v", ents)
		}
	}
}

// After a restart the agent re-attaches to the VMs that still run, keeps
// hibernated sandboxes asleep, and records as failed — with the reason —
// the sandboxes whose VM died while it was down.
func TestRestartReattachesOrReportsFailed(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	alive := h.create(pandastack.CreateRequest{})
	dead := h.create(pandastack.CreateRequest{})
	asleep := h.create(pandastack.CreateRequest{})
	if _, err := h.e.Hibernate(ctx, asleep.ID); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.drv.VM(dead.ID).Crash()
	h.start()

	if got := h.exec(alive.ID, "echo still here"); got != "still here\n" {
		t.Fatalf("re-attached sandbox: %q", got)
	}
	rec := h.record(dead.ID)
	if rec.State != pandastack.StateFailed || !strings.Contains(rec.EndReason, "restart") {
		t.Fatalf("sandbox whose VM died while the host was down: %s %q", rec.State, rec.EndReason)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.HibernateDir, asleep.ID)); err != nil {
		t.Fatalf("hibernated sandbox's files: %v", err)
	}
	if got := h.exec(asleep.ID, "echo woke"); got != "woke\n" {
		t.Fatalf("hibernated sandbox after restart: %q", got)
	}
}

// A restart decides from the host's own records alone (the agent has no
// store) which VMs are its machines: it re-attaches them, keeps the
// hibernated ones asleep, removes leftovers, and reports the dead with the
// reason in its inventory.
func TestRestartNeedsOnlyHostRecords(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	alive := h.create(pandastack.CreateRequest{})
	dead := h.create(pandastack.CreateRequest{Lifetime: pandastack.LifetimeService})
	asleep := h.create(pandastack.CreateRequest{})
	if _, err := h.e.Hibernate(ctx, asleep.ID); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.drv.VM(dead.ID).Crash()
	leftover, err := h.drv.Restore(ctx, h.cfg.Templates.(fixedTemplates).snap, vmm.RestoreOptions{ID: "vm_leftover"})
	if err != nil {
		t.Fatal(err)
	}
	a := New(h.cfg) // no engine, no store
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background(), false) })
	inv, err := a.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]pandastack.SandboxState{}
	for _, m := range inv.Machines {
		states[m.ID] = m.State
	}
	if states[alive.ID] != pandastack.StateRunning || states[asleep.ID] != pandastack.StateHibernated || len(states) != 2 {
		t.Fatalf("held after the restart: %v", states)
	}
	if len(inv.Ended) != 1 || inv.Ended[0].ID != dead.ID || inv.Ended[0].State != pandastack.StateFailed ||
		!strings.Contains(inv.Ended[0].EndReason, "restart") || inv.Ended[0].Lifetime != pandastack.LifetimeService {
		t.Fatalf("ended during the restart: %+v", inv.Ended)
	}
	select {
	case <-leftover.Exited():
	default:
		t.Fatal("a VM no record owns was left running")
	}
	g, err := a.Guest(ctx, alive.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Ping(ctx); err != nil {
		t.Fatalf("re-attached machine: %v", err)
	}
	if ents, _ := os.ReadDir(h.cfg.StateDir); len(ents) != 2 {
		t.Fatalf("host records after the restart: %v, want the two live machines'", ents)
	}
	if _, err := a.Kill(ctx, hostapi.KillRequest{ID: alive.ID, State: pandastack.StateKilled}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.StateDir, alive.ID+".json")); !os.IsNotExist(err) {
		t.Fatalf("host record of a killed machine: %v", err)
	}
	if _, err := a.Guest(ctx, alive.ID); !errors.Is(err, hostapi.ErrUnknownMachine) {
		t.Fatalf("guest of a killed machine: %v, want unknown", err)
	}
}

// Every path that starts a VM puts on the caps that hold from the guest's
// first answer (the read cap) once its agent answered, not before: a
// restore's page-ins of the snapshot are the platform's reads.
func TestEveryStartedVMIsSettledAfterItsAgentAnswers(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	want := func(what, id string, n int) {
		t.Helper()
		v := h.drv.VM(id)
		if v == nil {
			t.Fatalf("%s: no VM %s", what, id)
		}
		if after, early := v.Settled(); after != n || early != 0 {
			t.Fatalf("%s: settled %d times after its agent answered and %d before, want %d and 0", what, after, early, n)
		}
	}
	sbx := h.create(pandastack.CreateRequest{})
	want("create", sbx.ID, 1)
	kids, err := h.e.Fork(ctx, sbx.ID, 1)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	want("fork child", kids[0].ID, 1)
	if _, err := h.e.Hibernate(ctx, sbx.ID); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	if _, err := h.e.Wake(ctx, sbx.ID); err != nil {
		t.Fatalf("wake: %v", err)
	}
	want("wake", sbx.ID, 1)
}

// A sandbox whose VM is gone after a restart and whose TTL ran out ended by
// expiring (the host went down while it expired, say), not by failing.
func TestRestartEndsAGoneExpiredVMAsExpired(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	short := h.create(pandastack.CreateRequest{TTL: time.Hour})
	h.stop()
	h.drv.VM(short.ID).Crash()
	// Its record says it expired a second ago.
	recs, err := h.a.state.List()
	rec, ok := recs[short.ID]
	if err != nil || !ok {
		t.Fatalf("host record: %v %v", ok, err)
	}
	rec.Machine.ExpiresAt = time.Now().Add(-time.Second)
	if err := h.a.state.Put(rec); err != nil {
		t.Fatal(err)
	}
	a := New(h.cfg)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background(), false) })
	inv, err := a.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Ended) != 1 || inv.Ended[0].ID != short.ID || inv.Ended[0].State != pandastack.StateExpired {
		t.Fatalf("ended during the restart: %+v", inv.Ended)
	}
}
