package cli_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

// keys create --e2b prints a key in E2B's shape, which works with our API.
func TestKeysCreateE2B(t *testing.T) {
	env := apitest.Start(t)
	r := run(t, env, env.AdminKey, "", "keys", "create", "--team", "initech", "--e2b").want(t, 0)
	key := strings.TrimSpace(r.stdout)
	if !regexp.MustCompile(`^e2b_[0-9a-f]{40}$`).MatchString(key) || !strings.Contains(r.stderr, "team initech") {
		t.Fatalf("keys create --e2b: %+v", r)
	}
	run(t, env, key, "", "sandbox", "ls").want(t, 0)
}
