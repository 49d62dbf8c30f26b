package hostagent

import (
	"context"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A sandbox that hibernates on expiry sleeps when its TTL runs out, with
// no deadline, instead of ending; a use wakes it with its TTL again, so it
// sleeps again at its next deadline. A sandbox without it ends.
func TestExpiryHibernatesWhenAsked(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	// 2 s: time for the exec after the wake to end before its next deadline.
	sbx := h.create(pandastack.CreateRequest{TTL: 2 * time.Second, OnExpiry: pandastack.OnExpiryHibernate})
	plain := h.create(pandastack.CreateRequest{TTL: time.Second})
	if sbx.OnExpiry != pandastack.OnExpiryHibernate || h.record(sbx.ID).OnExpiry != pandastack.OnExpiryHibernate {
		t.Fatalf("on_expiry not recorded: %q", h.record(sbx.ID).OnExpiry)
	}

	rec := h.waitState(sbx.ID, pandastack.StateHibernated)
	if !rec.ExpiresAt.IsZero() {
		t.Fatalf("hibernated at its deadline, yet it has one: %v", rec.ExpiresAt)
	}
	if got := h.waitState(plain.ID, pandastack.StateExpired); got.EndReason != "ttl expired" {
		t.Fatalf("plain sandbox ended with %q", got.EndReason)
	}
	for _, id := range h.drv.Running() {
		if id == sbx.ID {
			t.Fatalf("%s's VM runs after it hibernated", id)
		}
	}

	if got := h.exec(sbx.ID, "echo awake"); got != "awake\n" {
		t.Fatalf("exec after the expiry: %q", got)
	}
	// Woken with a deadline again: it goes back to sleep at it.
	h.waitState(sbx.ID, pandastack.StateHibernated)
	if err := h.e.Kill(context.Background(), sbx.ID, pandastack.StateKilled); err != nil {
		t.Fatalf("kill the sleeping sandbox: %v", err)
	}
	if rec := h.record(sbx.ID); rec.State != pandastack.StateKilled {
		t.Fatalf("after kill: %s", rec.State)
	}
}

// One hibernated before its deadline keeps sleeping past it, its deadline
// cleared.
func TestExpiryOfASleepingSandboxClearsItsDeadline(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	sbx := h.create(pandastack.CreateRequest{TTL: time.Second, OnExpiry: pandastack.OnExpiryHibernate})
	if _, err := h.e.Hibernate(context.Background(), sbx.ID); err != nil {
		t.Fatalf("hibernate: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec := h.record(sbx.ID)
		if rec.State != pandastack.StateHibernated {
			t.Fatalf("sandbox is %s (%s), want hibernated", rec.State, rec.EndReason)
		}
		if rec.ExpiresAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deadline %v kept past its time", rec.ExpiresAt)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
