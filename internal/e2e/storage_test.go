package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestDiskQuota: a team at max_disk_gib gets 429 quota_exceeded naming it
// for a volume and a snapshot, and nothing half-made is listed or left in
// the snapshot directory; a snapshot's measured bytes count once it exists.
func TestDiskQuota(t *testing.T) {
	ctx := context.Background()
	admin := main.client(main.admin)
	c := teamClient(t, "e2e-disk")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	q, err := c.Quotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q.Usage.DiskMiB < 1024 {
		t.Fatalf("a live sandbox's root disk is not counted: usage %+v", q.Usage)
	}
	// Room for a little over 1 GiB more.
	limit := q.Usage.DiskMiB/1024 + 2
	if _, err := admin.SetTeamQuotas(ctx, "e2e-disk", sdk.QuotaUpdate{MaxDiskGiB: &limit}); err != nil {
		t.Fatal(err)
	}
	room := limit<<10 - q.Usage.DiskMiB
	snapDir := filepath.Join(main.dataDir, "cow", "snapshots")
	snapsBefore := dirEntries(snapDir)

	if _, err := c.CreateVolume(ctx, "too-big", room+1); !sdk.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "max_disk_gib") {
		t.Fatalf("volume one MiB past max_disk_gib: %v, want quota_exceeded naming max_disk_gib", err)
	}
	v, err := c.CreateVolume(ctx, "fits", room)
	if err != nil {
		t.Fatalf("volume up to max_disk_gib: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteVolume(context.Background(), v.ID) })
	if _, err := sb.Snapshot(ctx, "over"); !sdk.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "max_disk_gib is") {
		t.Fatalf("snapshot at max_disk_gib: %v, want quota_exceeded naming max_disk_gib", err)
	}
	if l, err := c.ListVolumes(ctx); err != nil || len(l) != 1 {
		t.Fatalf("volumes after the refusals: %+v %v, want only the one that fit", l, err)
	}
	if l, err := c.ListSnapshots(ctx); err != nil || len(l) != 0 {
		t.Fatalf("snapshots after the refusal: %+v %v", l, err)
	}
	if extra := newEntries(snapDir, snapsBefore); len(extra) != 0 {
		t.Fatalf("left in the snapshot dir: %s", strings.Join(extra, " "))
	}
	// The sandbox runs on.
	if r, err := sb.Exec(ctx, "echo ok", sdk.ExecOptions{}); err != nil || strings.TrimSpace(string(r.Stdout)) != "ok" {
		t.Fatalf("exec after the refusals: %v", err)
	}

	// Lifted, the snapshot is taken, and its bytes count from then on.
	none := 0
	if _, err := admin.SetTeamQuotas(ctx, "e2e-disk", sdk.QuotaUpdate{MaxDiskGiB: &none}); err != nil {
		t.Fatal(err)
	}
	sn, err := sb.Snapshot(ctx, "lifted")
	if err != nil {
		t.Fatalf("snapshot with no disk limit: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSnapshot(context.Background(), sn.ID) })
	after, err := c.Quotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := q.Usage.DiskMiB + room + int((sn.SizeBytes+1<<20-1)>>20); after.Usage.DiskMiB != want {
		t.Fatalf("usage after the snapshot %d MiB, want %d (sandbox, volume and the snapshot's %d bytes)", after.Usage.DiskMiB, want, sn.SizeBytes)
	}
}

// TestStorageReserve: on a server whose VM filesystem is below its
// --storage-reserve, a new sandbox and a new volume answer 507
// insufficient_storage saying how much is free, while a sandbox already
// running still execs and writes files (into the reserve); the admin sees
// the reserve in GET quotas; once space is freed, creates work again.
// The same server's VMs print to their console in a loop and leave a
// capped serial.log.
func TestStorageReserve(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestServer(t, "ps-e2e-reserve-", "--storage-size", "16GiB", "--storage-reserve", "3GiB", "--pool", "0")
	t.Cleanup(s.stop) // after the sandboxes' own cleanups kill them
	admin := s.client(s.admin)
	k, err := admin.CreateKey(ctx, "e2e-reserve", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(k.Key)
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})

	t.Run("a console printed in a loop leaves a capped log", func(t *testing.T) {
		// ~3 MB of lines to the serial console (the cap is 1 MiB).
		_, err := sb.Exec(ctx, "i=0; while [ $i -lt 30000 ]; do echo \"console line $i: a guest printing forever to its serial port\"; i=$((i+1)); done > /dev/ttyS0",
			sdk.ExecOptions{TimeoutSeconds: 600})
		if err != nil {
			t.Fatal(err)
		}
		log := filepath.Join(dir, "cow", "vms", sb.ID, "serial.log")
		var b []byte
		for deadline := time.Now().Add(2 * time.Minute); ; {
			b, err = os.ReadFile(log)
			if err == nil && len(b) <= 1<<20 && strings.Contains(string(b), "console line 29999") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("serial.log is %d bytes (%v), want at most 1 MiB ending with the last line", len(b), err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !strings.HasPrefix(string(b), "[pandastack: console log capped at 1048576 bytes: ") {
			t.Fatalf("capped log does not start with the marker: %q", b[:min(len(b), 120)])
		}
	})

	if _, err := sb.Files().Write(ctx, "/root/before.txt", []byte("before")); err != nil {
		t.Fatal(err)
	}
	free := fillDisk(t, filepath.Join(dir, "cow"), 2<<30)

	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 120})
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Status != 507 || ae.Code != "insufficient_storage" || !strings.Contains(ae.Message, "MiB free") {
		free()
		t.Fatalf("create below the reserve: %v, want 507 insufficient_storage saying what is free", err)
	}
	t.Logf("create below the reserve: %s", ae.Message)
	if _, err := c.CreateVolume(ctx, "v", 64); !errors.Is(err, sdk.ErrInsufficientStorage) {
		free()
		t.Fatalf("volume below the reserve: %v", err)
	}
	if l, err := c.ListSandboxes(ctx, sdk.ListParams{}); err != nil || len(l) != 1 {
		free()
		t.Fatalf("sandboxes after the refusal: %v %v, want only the running one", err, len(l))
	}
	// The running sandbox writes into the reserve.
	r, err := sb.Exec(ctx, "dd if=/dev/urandom of=/root/new.bin bs=1M count=64 status=none && sync && stat -c %s /root/new.bin && cat /root/before.txt", sdk.ExecOptions{})
	if err != nil || r.ExitCode != 0 || string(r.Stdout) != "67108864\nbefore" {
		free()
		t.Fatalf("a running sandbox writing below the reserve: %v %+v", err, r)
	}
	aq, err := admin.TeamQuotas(ctx, "e2e-reserve")
	if err != nil || aq.Storage == nil || aq.Storage.ReserveBytes != 3<<30 || aq.Storage.FreeBytes > aq.Storage.ReserveBytes {
		free()
		t.Fatalf("admin's quotas storage = %+v, %v; want the 3 GiB reserve and free below it", aq, err)
	}
	free()
	sb2, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 120})
	if err != nil {
		t.Fatalf("create once space is freed: %v", err)
	}
	_ = sb2.Kill(ctx)
}
