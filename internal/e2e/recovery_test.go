package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A server that crashes leaves its VMs running; the next start re-attaches
// to the live ones, ends the expired ones and removes pool leftovers.
func TestCrashRecovery(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestServer(t, "ps-crash-")
	defer func() { s.stop() }() // the last one started on dir
	c := s.client(s.admin)
	keep, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keep.Files().Write(ctx, "/root/state.txt", []byte("survives")); err != nil {
		t.Fatal(err)
	}
	pid, err := keep.StartBackground(ctx, "sleep 1000", sdk.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	short, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Auto-hibernate is kept in the store: enforced after the restart too.
	const idle = 10
	napper, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600, AutoHibernateSeconds: idle})
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot taken before the crash is listed and restores after it.
	sn, err := keep.Snapshot(ctx, "before-crash")
	if err != nil {
		t.Fatal(err)
	}
	sleepy, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sleepy.Files().Write(ctx, "/tmp/mem.txt", []byte("in memory")); err != nil {
		t.Fatal(err)
	}
	if err := sleepy.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	s.crash()
	if n := len(qemuProcesses(dir)); n < 2 {
		t.Fatalf("%d QEMU processes after the crash, want the sandboxes' still running", n)
	}
	time.Sleep(4 * time.Second) // short's TTL runs out while the server is down

	s, err = startServer(dir)
	if err != nil {
		t.Fatal(err)
	}
	c = s.client(s.admin)
	got, err := c.GetSandbox(ctx, keep.ID)
	if err != nil || got.State != "running" {
		t.Fatalf("kept sandbox after restart: %v %+v", err, got)
	}
	keep = c.Sandbox(keep.ID)
	b, err := keep.Files().Read(ctx, "/root/state.txt")
	if err != nil || string(b) != "survives" {
		t.Fatalf("file after restart: %v %q", err, b)
	}
	ps, err := keep.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range ps {
		found = found || (p.PID == pid && p.Running)
	}
	if !found {
		t.Fatalf("background process %d not running after restart: %+v", pid, ps)
	}
	if l, err := c.ListSnapshots(ctx); err != nil || len(l) != 1 || l[0].ID != sn.ID || l[0].Name != "before-crash" {
		t.Fatalf("snapshots after restart: %v %+v", err, l)
	}
	// The auto-hibernating sandbox still has its setting, and (idle) sleeps.
	if g, err := c.GetSandbox(ctx, napper.ID); err != nil || g.AutoHibernateSeconds != idle {
		t.Fatalf("auto-hibernate setting after restart: %v %+v", err, g)
	} else {
		t.Logf("auto-hibernating sandbox %s after the restart", g.State)
	}
	eventually(t, idle*time.Second+2*time.Minute, "the idle sandbox to hibernate after the restart", func() bool {
		g, err := c.GetSandbox(ctx, napper.ID)
		return err == nil && g.State == "hibernated"
	})
	if err := c.Sandbox(napper.ID).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	// The hibernated sandbox is still hibernated, and wakes on use.
	if g, err := c.GetSandbox(ctx, sleepy.ID); err != nil || g.State != "hibernated" {
		t.Fatalf("hibernated sandbox after restart: %v %+v", err, g)
	}
	if r, err := c.Sandbox(sleepy.ID).Exec(ctx, "cat /tmp/mem.txt", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "in memory" {
		t.Fatalf("wake after restart: %v %q", err, r.Stdout)
	}
	if err := c.Sandbox(sleepy.ID).Kill(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		g, err := c.GetSandbox(ctx, short.ID)
		if err == nil && g.State == "expired" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox whose TTL ran out while the server was down, 10 s on: %v %+v", err, g)
		}
	}
	// Only the re-attached sandbox and the new pool remain.
	if err := s.waitTemplate(template, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The snapshot restores after the restart, and needs nothing of its
	// template: with the template's baked files gone, it still restores
	// (it keeps its own RAM, disk, device state and machine).
	tplDir := filepath.Join(dir, "cow", "templates", template)
	if err := os.Rename(tplDir, tplDir+".gone"); err != nil {
		t.Fatal(err)
	}
	restored, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID, TTLSeconds: 300})
	if rerr := os.Rename(tplDir+".gone", tplDir); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("restore a snapshot taken before the crash, its template gone: %v", err)
	}
	if b, err := restored.Files().Read(ctx, "/root/state.txt"); err != nil || string(b) != "survives" {
		t.Fatalf("restored after restart: %v %q", err, b)
	}
	if restored.Template != template {
		t.Fatalf("restored sandbox's template %q, want %q", restored.Template, template)
	}
	if err := restored.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := keep.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	s.stop()
	// A graceful stop leaves no pool process behind; sandboxes (none now) would stay.
	eventually(t, 10*time.Second, "no QEMU left", func() bool { return len(qemuProcesses(dir)) == 0 })
	if d := vmDirs(dir); len(d) != 0 {
		t.Fatalf("vm dirs left: %v", d)
	}
	// Nor any namespace, host link or nftables table: every sandbox ended,
	// including the one re-attached after the crash and then hibernated.
	if nss, links, tables := ownNetObjects(t, dir); nss+links+tables != 0 {
		t.Fatalf("network left after a graceful stop with no sandboxes: %d namespaces, %d links, %d tables", nss, links, tables)
	}
}
