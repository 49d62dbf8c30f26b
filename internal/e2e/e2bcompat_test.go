package e2e

import (
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestE2BCompat runs the stock `e2b` npm package (pinned in
// testdata/e2bcompat/package-lock.json), unchanged, under node's test
// runner against the suite's server, configured as an E2B user would:
// E2B_API_KEY (a key from keys create --e2b), E2B_API_URL and
// E2B_SANDBOX_URL at the server's port, E2B_DOMAIN for getHost. See
// testdata/e2bcompat/e2b.test.mjs for what it checks; e2b-lifecycle.test.mjs
// pauses at the timeout and resumes; e2b-tls.test.mjs runs the SDK with
// E2B_DOMAIN alone, over TLS to the server's SNI listener.
func TestE2BCompat(t *testing.T) {
	runE2BSuite(t, "e2b", "e2b.test.mjs", "e2b-2.50.test.mjs", "e2b-network.test.mjs", "e2b-lifecycle.test.mjs",
		"e2b-tls.test.mjs")
}

// TestE2BCodeInterpreter runs the stock `@e2b/code-interpreter` package
// (pinned likewise) the same way: runCode onto our code-interpreter
// template's kernel. See testdata/e2bcompat/code-interpreter.test.mjs.
func TestE2BCodeInterpreter(t *testing.T) {
	needTemplate(t, "code-interpreter")
	runE2BSuite(t, "e2b-code-interpreter", "code-interpreter.test.mjs")
}

// runE2BSuite runs node test files of testdata/e2bcompat against the
// suite's server with E2B keys of a new team (and of another), then checks
// that the run left no sandbox of that team live.
func runE2BSuite(t *testing.T, team string, files ...string) {
	ctx := context.Background()
	dir, err := filepath.Abs("testdata/e2bcompat")
	if err != nil {
		t.Fatal(err)
	}
	admin := main.client(main.admin)
	key, err := admin.CreateE2BKey(ctx, team, "e2e")
	if err != nil {
		t.Fatalf("create E2B key: %v", err)
	}
	other, err := admin.CreateE2BKey(ctx, team+"-other", "e2e")
	if err != nil {
		t.Fatalf("create the other team's E2B key: %v", err)
	}
	if !strings.HasPrefix(key.Key, "e2b_") || len(key.Key) != 44 {
		t.Fatalf("E2B key %q: want e2b_ + 40 hex", key.Key)
	}

	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	u, err := url.Parse(main.url)
	if err != nil {
		t.Fatal(err)
	}
	// For E2B_DOMAIN over TLS: the server's CA, trusted by node as a user
	// trusts it, and the SNI listener's port on the sandbox domain.
	caPEM, err := main.client("").CACertificate(ctx)
	if err != nil {
		t.Fatalf("get the server's CA: %v", err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	_, tlsPort, err := net.SplitHostPort(main.tlsAddr)
	if err != nil {
		t.Fatal(err)
	}
	node := exec.Command("node", append([]string{"--test", "--test-concurrency=1"}, files...)...)
	node.Dir = dir
	node.Env = append(os.Environ(),
		"E2B_API_KEY="+key.Key, "E2B_OTHER_KEY="+other.Key,
		"E2B_API_URL="+main.url, "E2B_SANDBOX_URL="+main.url,
		"E2B_DOMAIN=localhost:"+u.Port(), "E2B_TEST_OUTSIDE_URL="+outsideURL(outside.ip),
		"E2B_TLS_DOMAIN=localhost:"+tlsPort, "NODE_EXTRA_CA_CERTS="+caFile)
	out, err := node.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test %v (stock E2B SDK): %v\n%s", files, err, out)
	}
	t.Logf("node --test:\n%s", tailLines(string(out), 12))

	// The E2B key works with PandaStack's own API too, and the run left
	// no sandbox behind.
	left, err := main.client(key.Key).ListSandboxes(ctx, sdk.ListParams{})
	if err != nil {
		t.Fatalf("list sandboxes with the E2B key through our API: %v", err)
	}
	if len(left) != 0 {
		t.Fatalf("%d sandboxes left live after %v", len(left), files)
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
