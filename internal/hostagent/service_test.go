package hostagent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A service machine has no expiry: the reaper never ends it, however
// long it runs; a sandbox beside it expires on time. Its TTL cannot be set.
func TestServiceMachineIsNeverReaped(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	svc := h.create(pandastack.CreateRequest{Lifetime: pandastack.LifetimeService, TTL: time.Millisecond})
	if !svc.ExpiresAt.IsZero() || h.record(svc.ID).Lifetime != pandastack.LifetimeService {
		t.Fatalf("service machine recorded as %+v", h.record(svc.ID))
	}
	short := h.create(pandastack.CreateRequest{TTL: time.Millisecond})
	h.waitState(short.ID, pandastack.StateExpired) // the reaper ran past the service machine
	if got := h.exec(svc.ID, "echo alive"); got != "alive\n" {
		t.Fatalf("service machine after the reaper ran: %q", got)
	}
	if _, err := h.e.SetTTL(ctx, svc.ID, time.Minute); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("SetTTL of a service machine: %v, want invalid", err)
	}
	// Its forks are service machines too.
	kids, err := h.e.Fork(ctx, svc.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if k := h.record(kids[0].ID); k.Lifetime != pandastack.LifetimeService || !k.ExpiresAt.IsZero() {
		t.Fatalf("fork of a service machine: %+v", k)
	}
}

// A service machine survives restarts: re-attached when its VM still runs
// (hibernated when it slept, woken on use), recorded failed with the
// reason when its VM died while the host was down — never silently gone.
func TestServiceMachineAcrossRestarts(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	ctx := context.Background()
	svc := pandastack.CreateRequest{Lifetime: pandastack.LifetimeService}
	running, asleep, dies := h.create(svc), h.create(svc), h.create(svc)
	if _, err := h.e.Hibernate(ctx, asleep.ID); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.drv.VM(dies.ID).Crash()
	h.start()

	if got := h.exec(running.ID, "echo reattached"); got != "reattached\n" {
		t.Fatalf("running service machine after restart: %q", got)
	}
	if rec := h.record(asleep.ID); rec.State != pandastack.StateHibernated {
		t.Fatalf("hibernated service machine after restart: %s", rec.State)
	}
	if got := h.exec(asleep.ID, "echo woken"); got != "woken\n" {
		t.Fatalf("hibernated service machine on use: %q", got)
	}
	rec := h.record(dies.ID)
	if rec.State != pandastack.StateFailed || !strings.Contains(rec.EndReason, "restart") {
		t.Fatalf("service machine whose VM died: %s %q", rec.State, rec.EndReason)
	}
	// A second restart keeps them (a zero expiry is not "expired while down").
	h.restart()
	for _, id := range []string{running.ID, asleep.ID} {
		if rec := h.record(id); !rec.State.Live() {
			t.Fatalf("service machine %s after a second restart: %s %q", id, rec.State, rec.EndReason)
		}
	}
}
