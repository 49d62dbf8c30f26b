package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A service machine (lifetime "service") has no TTL and is never reaped;
// it is listed per team; it survives a server crash (re-attached), sleeps
// through it when hibernated and wakes on use; and one whose VM died while
// the server was down is reported failed with the reason.
func TestServiceMachines(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestServer(t, "ps-service-")
	defer func() { s.stop() }() // the last one started on dir
	c := s.client(s.admin)
	svc := func(t *testing.T) *sdk.Sandbox {
		t.Helper()
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, Lifetime: "service"})
		if err != nil {
			t.Fatalf("create service machine: %v", err)
		}
		return sb
	}
	var keep, sleeper, doomed *sdk.Sandbox

	t.Run("a service machine has no TTL", func(t *testing.T) {
		keep = svc(t)
		if keep.Lifetime != "service" || !keep.ExpiresAt.IsZero() {
			t.Fatalf("service machine: lifetime %q, expires_at %v", keep.Lifetime, keep.ExpiresAt)
		}
		if _, err := keep.Files().Write(ctx, "/root/state.txt", []byte("survives")); err != nil {
			t.Fatal(err)
		}
		err := keep.SetTTL(ctx, 60)
		var e *sdk.APIError
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, "no TTL") {
			t.Fatalf("set the TTL of a service machine: %v", err)
		}
		if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, Lifetime: "service", TTLSeconds: 60}); err == nil {
			t.Fatal("a service machine with a TTL was created")
		}
	})

	t.Run("service machines are listed per team", func(t *testing.T) {
		sleeper, doomed = svc(t), svc(t)
		box, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		defer box.Kill(ctx)
		l, err := c.ListMachines(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if l.Count != 3 || len(l.Machines) != 3 {
			t.Fatalf("machines: %+v", l)
		}
		for _, m := range l.Machines {
			if m.ID == box.ID {
				t.Fatalf("a sandbox is listed as a service machine")
			}
		}
	})

	t.Run("a server crash leaves them to be re-attached or reported", func(t *testing.T) {
		if err := sleeper.Hibernate(ctx); err != nil {
			t.Fatal(err)
		}
		s.crash()
		// The doomed machine's VM dies while the server is down.
		b, err := os.ReadFile(filepath.Join(dir, "cow", "vms", doomed.ID, "vm.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ PID int }
		if err := json.Unmarshal(b, &m); err != nil || m.PID <= 0 {
			t.Fatalf("vm.json of %s: %v %s", doomed.ID, err, b)
		}
		if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if s, err = startServer(dir); err != nil {
			t.Fatal(err)
		}
		c = s.client(s.admin)
		got, err := c.GetSandbox(ctx, keep.ID)
		if err != nil || got.State != "running" || got.Lifetime != "service" {
			t.Fatalf("service machine after the crash: %v %+v", err, got)
		}
		if b, err := c.Sandbox(keep.ID).Files().Read(ctx, "/root/state.txt"); err != nil || string(b) != "survives" {
			t.Fatalf("re-attached service machine's file: %v %q", err, b)
		}
		d, err := c.GetSandbox(ctx, doomed.ID)
		if err != nil || d.State != "failed" || !strings.Contains(d.EndReason, "restart") {
			t.Fatalf("service machine whose VM died while the server was down: %v %+v", err, d)
		}
		l, err := c.ListMachines(ctx, true)
		if err != nil || l.Count != 2 || len(l.Machines) != 3 {
			t.Fatalf("machines after the crash: %v %+v", err, l)
		}
	})

	t.Run("a hibernated one sleeps through it and wakes on use", func(t *testing.T) {
		if g, err := c.GetSandbox(ctx, sleeper.ID); err != nil || g.State != "hibernated" {
			t.Fatalf("hibernated service machine after the crash: %v %+v", err, g)
		}
		r, err := c.Sandbox(sleeper.ID).Exec(ctx, "echo awake", sdk.ExecOptions{TimeoutSeconds: 60})
		if err != nil || strings.TrimSpace(string(r.Stdout)) != "awake" {
			t.Fatalf("wake on use: %v %q", err, r.Stdout)
		}
		if g, err := c.GetSandbox(ctx, sleeper.ID); err != nil || g.State != "running" {
			t.Fatalf("after use: %v %+v", err, g)
		}
	})

	for _, sb := range []*sdk.Sandbox{keep, sleeper} {
		if sb != nil {
			if err := c.Sandbox(sb.ID).Kill(ctx); err != nil {
				t.Error(err)
			}
		}
	}
	s.stop()
	eventually(t, 10*time.Second, "no QEMU left", func() bool { return len(qemuProcesses(dir)) == 0 })
}
