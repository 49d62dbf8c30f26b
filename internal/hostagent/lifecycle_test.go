package hostagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
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

	kids, err := h.a.Fork(ctx, sbx.ID, 1)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	wantDeny("fork child", 1)
	if h.drv.Restores()[1].Options.ID != kids[0].ID {
		t.Fatalf("fork child restored as %s, recorded as %s", h.drv.Restores()[1].Options.ID, kids[0].ID)
	}

	sn, err := h.a.Snapshot(ctx, sbx.ID, "s1")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	h.create(pandastack.CreateRequest{Snapshot: sn.ID, Network: deny})
	wantDeny("snapshot restore", 2)

	if _, err := h.a.Hibernate(ctx, sbx.ID); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	if _, err := h.a.Wake(ctx, sbx.ID); err != nil {
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
	if err := h.a.Kill(ctx, sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if rec := h.record(sbx.ID); rec.State != pandastack.StateKilled || rec.EndedAt == nil {
		t.Fatalf("after kill: %+v", rec)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("vm dir after kill: %v", err)
	}
	if _, err := h.a.Guest(ctx, sbx.ID); pandastack.ErrorCode(err) != pandastack.EGone {
		t.Fatalf("guest of a killed sandbox: %v, want gone", err)
	}
	if err := h.a.Kill(ctx, sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("second kill: %v", err)
	}
}

// A hibernated sandbox has no VM; any use wakes it, under its own id.
func TestHibernateAndWakeOnUse(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	sbx := h.create(pandastack.CreateRequest{})
	if _, err := h.a.Hibernate(ctx, sbx.ID); err != nil {
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
	if _, err := h.a.Hibernate(ctx, asleep.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.a.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
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

// blindStore is a store whose sandbox records cannot be read.
type blindStore struct{ pandastack.Store }

func (blindStore) GetSandbox(ctx context.Context, id string) (pandastack.Sandbox, error) {
	return pandastack.Sandbox{}, errors.New("the control plane is unreachable")
}

func (blindStore) ListSandboxes(ctx context.Context, f pandastack.SandboxFilter) ([]pandastack.Sandbox, error) {
	return nil, errors.New("the control plane is unreachable")
}

// A restart decides from the host's own records which VMs are its
// machines: it re-attaches them without reading a sandbox record from the
// control plane, and still removes leftovers and reports the dead.
func TestRestartNeedsOnlyHostRecords(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	alive := h.create(pandastack.CreateRequest{})
	dead := h.create(pandastack.CreateRequest{Lifetime: pandastack.LifetimeService})
	asleep := h.create(pandastack.CreateRequest{})
	if _, err := h.a.Hibernate(ctx, asleep.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.a.Close(ctx, false); err != nil {
		t.Fatal(err)
	}
	h.drv.VM(dead.ID).Crash()
	leftover, err := h.drv.Restore(ctx, h.cfg.Templates.(fixedTemplates).snap, vmm.RestoreOptions{ID: "vm_leftover"})
	if err != nil {
		t.Fatal(err)
	}
	h.cfg.Store = blindStore{h.store}
	h.start()

	if got := h.exec(alive.ID, "echo here"); got != "here\n" {
		t.Fatalf("re-attached sandbox: %q", got)
	}
	if got := h.exec(asleep.ID, "echo woke"); got != "woke\n" {
		t.Fatalf("hibernated sandbox: %q", got)
	}
	if rec := h.record(dead.ID); rec.State != pandastack.StateFailed || !strings.Contains(rec.EndReason, "restart") {
		t.Fatalf("machine whose VM died: %s %q", rec.State, rec.EndReason)
	}
	select {
	case <-leftover.Exited():
	default:
		t.Fatal("a VM no record owns was left running")
	}
	if ents, _ := os.ReadDir(h.cfg.StateDir); len(ents) != 2 {
		t.Fatalf("host records after the restart: %v, want the two live machines'", ents)
	}
	if err := h.a.Kill(ctx, alive.ID, pandastack.StateKilled); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.StateDir, alive.ID+".json")); !os.IsNotExist(err) {
		t.Fatalf("host record of a killed machine: %v", err)
	}
}
