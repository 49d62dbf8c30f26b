package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestQuotasAndKeys: on a real server, a fork counts against max_sandboxes,
// a revoked key fails at once, and the admin key is in its file only.
func TestQuotasAndKeys(t *testing.T) {
	ctx := context.Background()
	admin := main.client(main.admin)

	t.Run("the admin key is in DATA/admin-key, not in the server's log", func(t *testing.T) {
		b, err := os.ReadFile(main.log)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), main.admin) {
			t.Fatal("the server log shows the admin key")
		}
		fi, err := os.Stat(main.dataDir + "/admin-key")
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("admin-key: %v, %v; want mode 0600", fi, err)
		}
	})

	k, err := admin.CreateKey(ctx, "e2e-quotas", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := main.client(k.Key)
	one := 1
	if _, err := admin.SetTeamQuotas(ctx, "e2e-quotas", sdk.QuotaUpdate{MaxSandboxes: &one}); err != nil {
		t.Fatal(err)
	}

	t.Run("a fork's child counts against max_sandboxes", func(t *testing.T) {
		sb := newSandbox(t, c, sdk.CreateSandboxParams{})
		if _, err := sb.Fork(ctx); !sdk.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "max_sandboxes is 1") {
			t.Fatalf("fork over max_sandboxes: %v", err)
		}
		if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template}); !sdk.IsQuotaExceeded(err) {
			t.Fatalf("create over max_sandboxes: %v", err)
		}
	})

	t.Run("a revoked key fails at once", func(t *testing.T) {
		if err := admin.RevokeKey(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Quotas(ctx); !sdk.IsUnauthorized(err) {
			t.Fatalf("revoked key: %v", err)
		}
	})
}
