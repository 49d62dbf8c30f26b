package hostagent

import (
	"context"
	"testing"

	"github.com/pandastack/pandastack"
)

// deferredSandbox creates a sandbox on a new test host from a snapshot of
// another, its session deferred.
func deferredSandbox(t *testing.T) (*testHost, pandastack.Sandbox) {
	t.Helper()
	h := newTestHost(t)
	parent := h.create(pandastack.CreateRequest{})
	sn, err := h.e.Snapshot(context.Background(), parent.ID, "s1")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return h, h.create(pandastack.CreateRequest{Snapshot: sn.ID, DeferSession: true})
}

// A sandbox created from a snapshot with its session deferred answers the
// create before its agent is greeted (no caps settled yet: they follow
// the guest's first answer); its first use begins the session, and then
// it works like any other.
func TestDeferredSessionBeginsAtFirstUse(t *testing.T) {
	t.Parallel()
	h, sbx := deferredSandbox(t)
	ctx := context.Background()
	v := h.drv.VM(sbx.ID)
	if after, early := v.Settled(); after != 0 || early != 0 {
		t.Fatalf("after the create: settled %d times after its agent answered, %d before; want none yet", after, early)
	}
	if out := h.exec(sbx.ID, "echo begun"); out != "begun\n" {
		t.Fatalf("exec after a deferred create: %q", out)
	}
	if after, early := v.Settled(); after != 1 || early != 0 {
		t.Fatalf("after the first use: settled %d times after its agent answered, %d before; want once after", after, early)
	}
	if out := h.exec(sbx.ID, "echo again"); out != "again\n" {
		t.Fatalf("second exec: %q", out)
	}
	if err := h.e.Kill(ctx, sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("kill: %v", err)
	}
}

// A deferred sandbox killed before any use ends like any other.
func TestDeferredSessionKilledUnused(t *testing.T) {
	t.Parallel()
	h, sbx := deferredSandbox(t)
	ctx := context.Background()
	if err := h.e.Kill(ctx, sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("kill: %v", err)
	}
	rec, err := h.store.GetSandbox(ctx, sbx.ID)
	if err != nil || rec.State != pandastack.StateKilled {
		t.Fatalf("record after the kill: %+v, %v", rec, err)
	}
	if _, err := h.e.Guest(ctx, sbx.ID); pandastack.ErrorCode(err) != pandastack.EGone {
		t.Fatalf("guest after the kill: %v; want gone", err)
	}
}
