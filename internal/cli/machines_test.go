package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

// `sandbox create --lifetime service` makes a service machine (no expiry),
// `machines` lists it — not the team's sandboxes — with the team's cap,
// and a bad lifetime is the server's 400.
func TestServiceMachinesCLI(t *testing.T) {
	env := apitest.Start(t)
	svc := createSandbox(t, env, "--lifetime", "service")
	sb := createSandbox(t, env)
	rec, err := env.Store.GetSandbox(context.Background(), svc)
	if err != nil || !rec.Lifetime.IsService() || !rec.ExpiresAt.IsZero() {
		t.Fatalf("stored %+v, %v", rec, err)
	}
	r := run(t, env, env.Key, "", "machines").want(t, 0)
	if !strings.Contains(r.stdout, svc) || strings.Contains(r.stdout, sb) || !strings.Contains(r.stdout, "1 live") {
		t.Fatalf("machines:\n%s", r.stdout)
	}
	run(t, env, env.Key, "", "sandbox", "kill", svc).want(t, 0)
	if r := run(t, env, env.Key, "", "machines").want(t, 0); strings.Contains(r.stdout, svc) {
		t.Fatalf("killed machine listed without --all:\n%s", r.stdout)
	}
	if r := run(t, env, env.Key, "", "machines", "--all").want(t, 0); !strings.Contains(r.stdout, svc) || !strings.Contains(r.stdout, "killed") {
		t.Fatalf("machines --all:\n%s", r.stdout)
	}
	if r := run(t, env, env.Key, "", "sandbox", "create", "--lifetime", "forever"); r.code == 0 || !strings.Contains(r.stderr, "lifetime") {
		t.Fatalf("bad lifetime: exit %d, %s", r.code, r.stderr)
	}
}
