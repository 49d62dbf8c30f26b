package e2e

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// renderedDOM opens url in a real headless Chromium (Debian's, installed by
// scripts/setup) and returns the DOM after the page's scripts ran: what a
// person would see, not what the server sent. Chromium resolves every
// *.localhost name to loopback itself, so app hostnames need no DNS.
func renderedDOM(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Root has no user namespace sandbox for Chromium's renderer; the page
	// is the test's own.
	cmd := exec.CommandContext(ctx, "chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=10000", "--dump-dom", url)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("chromium %s: %v\n%s", url, err, ee.Stderr)
		}
		t.Fatalf("chromium %s: %v", url, err)
	}
	return string(out)
}
