package cli_test

import (
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/quotas"
)

func TestKeysCommands(t *testing.T) {
	env := apitest.Start(t)
	ls := run(t, env, env.AdminKey, "", "keys", "ls").want(t, 0)
	for _, team := range []string{"admin", "acme", "globex"} {
		if !strings.Contains(ls.stdout, team) {
			t.Fatalf("keys ls (admin) misses team %s:\n%s", team, ls.stdout)
		}
	}
	own := run(t, env, env.Key, "", "keys", "ls").want(t, 0)
	if !strings.Contains(own.stdout, env.KeyID) || strings.Contains(own.stdout, "globex") {
		t.Fatalf("keys ls (team key) lists:\n%s", own.stdout)
	}

	// Rotate prints the new secret alone on stdout; the old one stops working.
	rot := run(t, env, env.AdminKey, "", "keys", "rotate", env.KeyID).want(t, 0)
	newKey := strings.TrimSpace(rot.stdout)
	if !strings.HasPrefix(newKey, "pds_") || !strings.Contains(rot.stderr, "no longer works") {
		t.Fatalf("keys rotate: stdout %q stderr %q", rot.stdout, rot.stderr)
	}
	r := run(t, env, env.Key, "", "sandbox", "ls").want(t, 1)
	if !strings.Contains(r.stderr, "error: unauthorized") {
		t.Fatalf("old key after rotate: %s", r.stderr)
	}
	run(t, env, newKey, "", "sandbox", "ls").want(t, 0)

	// Revoke the new one with itself: done, and then refused.
	var newID string
	for _, line := range strings.Split(run(t, env, newKey, "", "keys", "ls", "--json").stdout, "\n") {
		if strings.Contains(line, `"id"`) && strings.Contains(line, "key_") {
			newID = strings.Trim(strings.TrimSpace(strings.SplitN(line, ":", 2)[1]), `",`)
		}
	}
	if newID == "" || newID == env.KeyID {
		t.Fatalf("new key's id not found (got %q)", newID)
	}
	run(t, env, newKey, "", "keys", "revoke", newID).want(t, 0)
	run(t, env, newKey, "", "sandbox", "ls").want(t, 1)
	r = run(t, env, env.OtherKey, "", "keys", "revoke", "key_nope").want(t, 1)
	if !strings.Contains(r.stderr, "error: not_found") {
		t.Fatalf("revoke of a missing key: %s", r.stderr)
	}
	run(t, env, env.AdminKey, "", "keys", "revoke").want(t, 2)
}

func TestQuotasCommands(t *testing.T) {
	env := apitest.Start(t, func(c *api.Config) {
		c.Quotas = quotas.New(quotas.Config{Store: c.Store, Defaults: quotas.Defaults})
	})
	set := run(t, env, env.AdminKey, "", "quotas", "set", "acme", "max_sandboxes=1", "requests_per_second=2.5").want(t, 0)
	if !strings.Contains(set.stdout, "team acme") || !strings.Contains(set.stdout, "2.5") {
		t.Fatalf("quotas set printed:\n%s", set.stdout)
	}
	createSandbox(t, env)
	r := run(t, env, env.Key, "", "sandbox", "create", "--template", "base").want(t, 1)
	if !strings.Contains(r.stderr, "error: quota_exceeded: max_sandboxes is 1; team has 1 live sandboxes") {
		t.Fatalf("create over the quota: %s", r.stderr)
	}
	get := run(t, env, env.Key, "", "quotas", "get").want(t, 0)
	lines := strings.Split(get.stdout, "\n")
	var row string
	for _, l := range lines {
		if strings.HasPrefix(l, "max_sandboxes") {
			row = strings.Join(strings.Fields(l), " ")
		}
	}
	if row != "max_sandboxes 1 1 team" {
		t.Fatalf("quotas get: max_sandboxes row %q in:\n%s", row, get.stdout)
	}
	run(t, env, env.AdminKey, "", "quotas", "set", "acme", "max_sandboxes=default").want(t, 0)
	createSandbox(t, env)

	for _, bad := range [][]string{
		{"quotas", "set", "acme"},
		{"quotas", "set", "acme", "max_cats=1"},
		{"quotas", "set", "acme", "max_sandboxes=lots"},
	} {
		run(t, env, env.AdminKey, "", bad...).want(t, 2)
	}
	r = run(t, env, env.Key, "", "quotas", "set", "acme", "max_sandboxes=1000").want(t, 1)
	if !strings.Contains(r.stderr, "error: forbidden") {
		t.Fatalf("quotas set with a team key: %s", r.stderr)
	}
}
