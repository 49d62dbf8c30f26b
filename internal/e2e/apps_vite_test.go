package e2e

import (
	"context"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
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
//
// The repository has a package-lock.json, so the node_modules its install
// made is kept on the host (the dependency cache); a second deploy of a
// new commit with the same lockfile restores it into its build machine
// and skips the install — its log says so, nothing is downloaded — and
// serves the new bundle. Deleting the app frees the cache.
func TestAppsVite(t *testing.T) {
	s, dataDir := newTestServer(t, "ps-e2e-apps-vite-")
	defer func() { s.stop() }()
	c := s.client(s.admin)
	gs := startGitDaemon(t)
	lock, err := os.ReadFile("testdata/vite-package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	url := gs.push("vite", "main", map[string]string{
		"package.json": `{"name": "vite-e2e", "private": true, "type": "module",
  "scripts": {"dev": "vite", "build": "vite build"},
  "devDependencies": {"vite": "5.4.11"}}`,
		"package-lock.json": string(lock),
		"index.html":        `<!doctype html><html><body><div id="app"></div><script type="module" src="/src/main.js"></script></body></html>`,
		"src/main.js":       `document.querySelector("#app").textContent = "built by vite";`,
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
	cold, coldLog := time.Since(start), d.Log
	if !strings.Contains(d.Log, "dependency cache: miss for package-lock.json") || !strings.Contains(d.Log, "dependency cache: node_modules kept") {
		t.Fatalf("the cold deploy does not say it kept its dependencies:\n%s", d.Log)
	}
	cached := func() []string {
		m, _ := filepath.Glob(filepath.Join(dataDir, "apps", "depcache", "*", "*", "*.tar"))
		return m
	}
	if len(cached()) != 1 {
		t.Fatalf("dependency archives on the host: %v, want one", cached())
	}

	t.Run("a second deploy with the same lockfile restores its dependencies", func(t *testing.T) {
		gs.push("vite", "main", map[string]string{"src/main.js": `document.querySelector("#app").textContent = "built again from cache";`})
		start := time.Now()
		d := deployAndWait(t, c, "vite", "")
		warm := time.Since(start)
		if d.Status != sdk.DeployLive {
			t.Fatalf("second vite deploy: %+v\n%s", d, d.Log)
		}
		if !strings.Contains(d.Log, "dependency cache: hit for package-lock.json") || strings.Contains(d.Log, "$ npm ci") {
			t.Fatalf("the second deploy did not restore its dependencies and skip the install:\n%s", d.Log)
		}
		t.Logf("vite app deploy with a warm dependency cache: %s (cold %s, ratio %.2f)", warm.Round(time.Second), cold.Round(time.Second), warm.Seconds()/cold.Seconds())
		t.Logf("steps of the cold deploy:\n%s\nsteps of the warm one:\n%s", steps(coldLog), steps(d.Log))
		code, body, err := appGetAt(ctx, s.url, "vite", "/")
		m := regexp.MustCompile(`src="(/assets/index-[^"]+\.js)"`).FindStringSubmatch(body)
		if err != nil || code != 200 || m == nil {
			t.Fatalf("GET vite.apps.localhost/ after the second deploy: %d %v\n%s", code, err, body)
		}
		if code, js, err := appGetAt(ctx, s.url, "vite", m[1]); err != nil || code != 200 || !strings.Contains(js, "built again from cache") {
			t.Fatalf("the bundle served after the second deploy: %d %v, want the new text", code, err)
		}
	})

	// On this server too, since it reaches the npm registry
	// (apps_express_test.go).
	t.Run("an Express app deploys from git and answers JSON", func(t *testing.T) { testExpressApp(t, s, c, gs) })

	if err := c.DeleteApp(ctx, "vite"); err != nil {
		t.Fatal(err)
	}
	if left := cached(); len(left) != 0 {
		t.Fatalf("the deleted app's dependency archives are left: %v", left)
	}
}

// steps is a deploy log's timed lines (the server's own, not the
// commands' output).
func steps(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "[") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
