package quotas_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// What a team holds on the host's disk, from the store's records: live
// sandboxes' root disks at full size, hibernated ones' memory on top,
// volumes at their size and snapshots at their measured bytes; ended
// sandboxes and other teams' things do not count.
func TestDiskUsage(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	put := func(team string, state pandastack.SandboxState, mem, disk int) {
		t.Helper()
		e.n++
		sb := pandastack.Sandbox{ID: "sbx_d" + string(rune('a'+e.n)), TeamID: team, Template: "base", State: state,
			CPUs: 1, MemoryMiB: mem, DiskMiB: disk, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Metadata: map[string]string{}}
		if err := e.store.PutSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	put("acme", pandastack.StateRunning, 512, 2048)    // 2048
	put("acme", pandastack.StateHibernated, 512, 2048) // 2048 + 512 saved memory
	put("acme", pandastack.StateKilled, 512, 100000)   // ended: nothing
	put("globex", pandastack.StateRunning, 512, 100000)
	if err := e.store.CreateVolume(ctx, pandastack.Volume{ID: "vol_1", TeamID: "acme", Name: "v", SizeMiB: 1000, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	// 300 MiB and one byte: counted as 301 MiB.
	if err := e.store.CreateSnapshot(ctx, pandastack.Snapshot{ID: "snap_1", TeamID: "acme", Name: "a", SizeBytes: 300<<20 + 1, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxDiskGiB: 6}})
	u, err := svc.Usage(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := 2048 + 2048 + 512 + 1000 + 301; u.DiskMiB != want {
		t.Fatalf("disk usage %d MiB, want %d", u.DiskMiB, want)
	}

	// 5909 MiB held, 6144 allowed: 235 more fit, 236 do not.
	r, err := svc.Reserve(ctx, "acme", quotas.Usage{Volumes: 1, DiskMiB: 235})
	if err != nil {
		t.Fatalf("a volume up to the limit: %v", err)
	}
	_, err = svc.Reserve(ctx, "acme", quotas.Usage{Snapshots: 1, DiskMiB: 1})
	if pandastack.ErrorCode(err) != pandastack.EQuota || !strings.HasPrefix(pandastack.ErrorMessage(err), "max_disk_gib is 6; team holds 6.0 GiB") {
		t.Fatalf("a snapshot past max_disk_gib while the volume is in flight = %v", err)
	}
	r()
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{Volumes: 1, DiskMiB: 236}); pandastack.ErrorCode(err) != pandastack.EQuota ||
		!strings.Contains(pandastack.ErrorMessage(err), "max_disk_gib is 6") {
		t.Fatalf("a volume one MiB over = %v", err)
	}
	// What takes no disk is not refused by it, and globex is not affected.
	if r, err := svc.Reserve(ctx, "acme", quotas.Usage{Builds: 1}); err != nil {
		t.Fatalf("a build: %v", err)
	} else {
		r()
	}
	if r, err := svc.Reserve(ctx, "globex", quotas.Usage{DiskMiB: 1}); err == nil {
		t.Fatal("globex holds 97 GiB and took more")
	} else if r != nil {
		r()
	}
	// An admin's override applies at once; 0 is no limit.
	if _, err := svc.Set(ctx, "acme", pandastack.QuotaOverrides{MaxDiskGiB: ptr(0)}); err != nil {
		t.Fatal(err)
	}
	if r, err := svc.Reserve(ctx, "acme", quotas.Usage{DiskMiB: 1 << 20}); err != nil {
		t.Fatalf("no disk limit: %v", err)
	} else {
		r()
	}
	if _, err := svc.Set(ctx, "acme", pandastack.QuotaOverrides{MaxDiskGiB: ptr(-1)}); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("max_disk_gib -1 = %v, want invalid_argument", err)
	}
}

// spaceFunc is a quotas.Space.
type spaceFunc func(ctx context.Context) error

func (f spaceFunc) Check(ctx context.Context) error { return f(ctx) }

// Below the host's storage reserve every reservation is refused with the
// reserve's error, after the team's own limits, and holds nothing.
func TestReserveChecksSpace(t *testing.T) {
	e := newEnv(t)
	full := true
	space := spaceFunc(func(context.Context) error {
		if full {
			return pandastack.Errorf(pandastack.EInsufficientStorage, "at the reserve")
		}
		return nil
	})
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxVolumes: 1}, Space: space})
	ctx := t.Context()
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{Volumes: 1, DiskMiB: 10}); pandastack.ErrorCode(err) != pandastack.EInsufficientStorage {
		t.Fatalf("reserve below the storage reserve = %v, want insufficient_storage", err)
	}
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{Volumes: 2}); pandastack.ErrorCode(err) != pandastack.EQuota {
		t.Fatalf("over a team limit and the reserve = %v, want quota_exceeded first", err)
	}
	if err := svc.CheckSpace(ctx); pandastack.ErrorCode(err) != pandastack.EInsufficientStorage {
		t.Fatalf("CheckSpace = %v", err)
	}
	full = false
	// The refused reservations held nothing.
	r, err := svc.Reserve(ctx, "acme", quotas.Usage{Volumes: 1})
	if err != nil {
		t.Fatalf("with space again: %v", err)
	}
	r()
}
