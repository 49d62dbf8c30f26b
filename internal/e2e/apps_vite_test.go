package e2e

import (
	"context"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A Vite app is detected, its dependencies install from the npm registry
// inside the build VM (through this host's HTTPS proxy, whose CA the
// server's --extra-ca-certs makes the VM trust) and `vite build` runs
// there; the built page, not the source one, is served, and a real
// browser runs its bundle. A server of its own: the suite's main server
// resolves only its simulated outside world. The cold build takes minutes
// under TCG on 2 cores; it is the suite's one real framework build.
func TestAppsVite(t *testing.T) {
	s, _ := newTestServer(t, "ps-e2e-apps-vite-")
	defer func() { s.stop() }()
	c := s.client(s.admin)
	gs := startGitDaemon(t)
	url := gs.push("vite", "main", map[string]string{
		"package.json": `{"name": "vite-e2e", "private": true, "type": "module",
  "scripts": {"dev": "vite", "build": "vite build"},
  "devDependencies": {"vite": "5.4.11"}}`,
		"index.html":  `<!doctype html><html><body><div id="app"></div><script type="module" src="/src/main.js"></script></body></html>`,
		"src/main.js": `document.querySelector("#app").textContent = "built by vite";`,
	})
	ctx := context.Background()
	if _, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "vite", GitURL: url}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d := deployAndWait(t, c, "vite", "")
	if d.Status != sdk.DeployLive || d.Framework != "vite" {
		t.Fatalf("vite deploy: %+v\n%s", d, d.Log)
	}
	t.Logf("vite app cold deploy (npm install + vite build under %s): %s", "TCG", time.Since(start).Round(time.Second))
	code, body, err := appGetAt(ctx, s.url, "vite", "/")
	if err != nil || code != 200 || !strings.Contains(body, `src="/assets/index-`) {
		t.Fatalf("GET vite.apps.localhost/: %d %v\n%s", code, err, body)
	}
	// The served page holds an empty #app: only the built bundle, run by
	// a browser, puts the text in.
	if strings.Contains(body, "built by vite") {
		t.Fatalf("the served page already holds the text: %s", body)
	}
	u, err := neturl.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	if dom := renderedDOM(t, "http://vite.apps.localhost:"+u.Port()+"/"); !strings.Contains(dom, `<div id="app">built by vite</div>`) {
		t.Fatalf("Chromium's rendering of the app does not show the bundle's text:\n%s", dom)
	}
	if err := c.DeleteApp(ctx, "vite"); err != nil {
		t.Fatal(err)
	}
}
