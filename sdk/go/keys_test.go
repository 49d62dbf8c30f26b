package pandastack_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/quotas"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

func ptr[T any](v T) *T { return &v }

func TestKeysListRevokeRotate(t *testing.T) {
	ctx := context.Background()
	env, c := start(t)
	admin := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(env.AdminKey))

	k, err := admin.CreateKey(ctx, "initech", "ci")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := admin.ListKeys(ctx, "initech")
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || keys[0].Team != "initech" || keys[0].RevokedAt != nil {
		t.Fatalf("ListKeys(initech) = %+v, %v", keys, err)
	}
	mine, err := c.ListKeys(ctx, "")
	if err != nil || len(mine) != 1 || mine[0].ID != env.KeyID {
		t.Fatalf("a team key lists %+v, %v; want its own team's one key", mine, err)
	}

	// Rotate: the new key works, the old one is refused at once.
	old := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(k.Key))
	nk, err := admin.RotateKey(ctx, k.ID)
	if err != nil || nk.Team != "initech" || nk.Name != "ci" || nk.Key == k.Key {
		t.Fatalf("RotateKey = %+v, %v", nk, err)
	}
	if _, err := old.ListSandboxes(ctx, sdk.ListParams{}); !sdk.IsUnauthorized(err) {
		t.Fatalf("old key after rotation: %v", err)
	}
	fresh := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(nk.Key))
	if _, err := fresh.ListSandboxes(ctx, sdk.ListParams{}); err != nil {
		t.Fatalf("rotated key: %v", err)
	}

	// Revoke.
	if err := admin.RevokeKey(ctx, nk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.ListSandboxes(ctx, sdk.ListParams{}); !sdk.IsUnauthorized(err) {
		t.Fatalf("revoked key: %v", err)
	}
	if err := c.RevokeKey(ctx, nk.ID); !sdk.IsNotFound(err) {
		t.Fatalf("revoking another team's key: %v", err)
	}
}

func TestQuotasAndTypedErrors(t *testing.T) {
	ctx := context.Background()
	env, c := start(t, func(cfg *api.Config) {
		cfg.Quotas = quotas.New(quotas.Config{Store: cfg.Store, Defaults: quotas.Defaults})
	})
	admin := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(env.AdminKey))

	q, err := admin.SetTeamQuotas(ctx, "acme", sdk.QuotaUpdate{MaxSandboxes: ptr(1), MaxVolumes: ptr(7)})
	if err != nil || q.MaxSandboxes != 1 || q.MaxVolumes != 7 || q.MaxSnapshots != quotas.Defaults.MaxSnapshots {
		t.Fatalf("SetTeamQuotas = %+v, %v", q, err)
	}
	newSandbox(t, c)
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "base"})
	var ae *sdk.APIError
	if !sdk.IsQuotaExceeded(err) || !errors.As(err, &ae) || ae.Status != 429 || ae.RetryAfter != 0 {
		t.Fatalf("create over max_sandboxes: %#v", err)
	}
	own, err := c.Quotas(ctx)
	if err != nil || own.Team != "acme" || own.Usage.Sandboxes != 1 || own.MaxSandboxes != 1 {
		t.Fatalf("Quotas = %+v, %v", own, err)
	}

	// Reset goes back to the default; rate limits come with Retry-After.
	q, err = admin.SetTeamQuotas(ctx, "acme", sdk.QuotaUpdate{Reset: []string{"max_sandboxes"}, RequestsPerSecond: ptr(0.01), Burst: ptr(1)})
	if err != nil || q.MaxSandboxes != quotas.Defaults.MaxSandboxes || q.MaxVolumes != 7 {
		t.Fatalf("SetTeamQuotas(reset) = %+v, %v", q, err)
	}
	if _, err := c.ListSandboxes(ctx, sdk.ListParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ListSandboxes(ctx, sdk.ListParams{})
	if !sdk.IsRateLimited(err) || !errors.As(err, &ae) || ae.RetryAfter != 100*time.Second {
		t.Fatalf("over the rate: %#v", err)
	}
	if _, err := c.TeamQuotas(ctx, "acme"); !sdk.IsForbidden(err) {
		t.Fatalf("TeamQuotas with a team key: %v", err)
	}
}
