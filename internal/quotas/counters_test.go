package quotas_test

import (
	"context"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// A counter added after the Service was made (app hosting's caches and
// repositories) counts in max_disk_gib: what it reports is refused room.
func TestAddCounter(t *testing.T) {
	e := newEnv(t)
	svc := quotas.New(quotas.Config{Store: e.store, Defaults: quotas.Limits{MaxDiskGiB: 1}})
	ctx := t.Context()
	if r, err := svc.Reserve(ctx, "acme", quotas.Usage{DiskMiB: 1000}); err != nil {
		t.Fatalf("before the counter: %v", err)
	} else {
		r()
	}
	svc.AddCounter(func(_ context.Context, team string) (quotas.Usage, error) {
		if team == "acme" {
			return quotas.Usage{DiskMiB: 900}, nil
		}
		return quotas.Usage{}, nil
	})
	if u, err := svc.Usage(ctx, "acme"); err != nil || u.DiskMiB != 900 {
		t.Fatalf("usage %+v %v, want 900 MiB from the counter", u, err)
	}
	if _, err := svc.Reserve(ctx, "acme", quotas.Usage{DiskMiB: 200}); pandastack.ErrorCode(err) != pandastack.EQuota {
		t.Fatalf("200 MiB more past the counted 900 of 1024: %v, want quota_exceeded", err)
	}
	if r, err := svc.Reserve(ctx, "globex", quotas.Usage{DiskMiB: 1000}); err != nil {
		t.Fatalf("another team: %v", err)
	} else {
		r()
	}
}
