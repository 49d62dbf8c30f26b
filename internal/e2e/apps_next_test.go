package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// nextApp is a small Next.js app (the App Router): a page rendered on the
// server at build time — it shows a hash node computes then, which its
// source does not hold — and a client component that only a browser
// running the built bundle hydrates.
var nextApp = map[string]string{
	"package.json": `{"name": "next-e2e", "private": true,
  "scripts": {"dev": "next dev", "build": "next build", "start": "next start"},
  "dependencies": {"next": "16.4.6", "react": "19.3.1", "react-dom": "19.3.1"}}`,
	"app/layout.js": `export const metadata = { title: "pandastack next e2e" };

export default function RootLayout({ children }) {
  return (<html lang="en"><body>{children}</body></html>);
}
`,
	"app/page.js": `import { createHash } from "node:crypto";
import Hydrated from "./hydrated";

// Rendered on the server, at build time: the page is static.
export default function Page() {
  const sum = createHash("sha256").update("pandastack next e2e").digest("hex").slice(0, 16);
  return (
    <main>
      <h1>{` + "`next app sum ${sum}`" + `}</h1>
      <p id="node">{` + "`built by node ${process.version}`" + `}</p>
      <Hydrated />
    </main>
  );
}
`,
	"app/hydrated.js": `"use client";
import { useEffect, useState } from "react";

export default function Hydrated() {
  const [text, setText] = useState("waiting for hydration");
  useEffect(() => { setText(` + "`hydrated in the browser: ${6 * 7}`" + `); }, []);
  return <p id="client">{text}</p>;
}
`,
}

// A Next.js app is detected as next, its pinned dependencies install
// from the npm registry inside the build VM (through the server's HTTPS
// proxy) and `next build` runs there; `next start` serves the built app
// through the router. The page holds what only the build's server
// rendering computes, and Chromium shows the client component hydrated
// by the built bundle. A server of its own, like TestAppsVite's.
//
// The cold build takes many minutes under TCG (BENCHMARKS.md, Session 13),
// so the test runs only when PANDASTACK_E2E_NEXTJS=1.
func TestAppsNextJS(t *testing.T) {
	if os.Getenv("PANDASTACK_E2E_NEXTJS") != "1" {
		t.Skip("a Next.js build under TCG takes many minutes; run it with PANDASTACK_E2E_NEXTJS=1 PANDASTACK_E2E_CACHE=/var/cache/pandastack-e2e go test -count=1 -timeout 60m -run TestAppsNextJS ./internal/e2e/")
	}
	s, _ := newTestServer(t, "ps-e2e-apps-next-")
	defer func() { s.stop() }()
	c := s.client(s.admin)
	gs := startGitDaemon(t)
	lock, err := os.ReadFile("testdata/next-package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"package-lock.json": string(lock)}
	for k, v := range nextApp {
		files[k] = v
	}
	url := gs.push("next", "main", files)
	ctx := context.Background()
	if _, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "next", GitURL: url}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d := deployAndWaitWithin(t, c, "next", "", 40*time.Minute)
	if d.Status != sdk.DeployLive || d.Framework != "next" {
		t.Fatalf("next deploy: %+v\n%s", d, d.Log)
	}
	t.Logf("next app cold deploy (npm ci + next build + next start under TCG): %s", time.Since(start).Round(time.Second))
	t.Logf("steps of the cold deploy:\n%s", steps(d.Log))
	// node --run does not echo the script as npm did; Next's own output
	// says it built.
	if !strings.Contains(d.Log, "$ node --run build") || !strings.Contains(d.Log, "Compiled successfully") {
		t.Fatalf("the deploy did not run next build:\n%s", d.Log)
	}
	// The platform turns Next's telemetry off (NEXT_TELEMETRY_DISABLED);
	// with it on, the first build announces it.
	if strings.Contains(d.Log, "collects completely anonymous telemetry") {
		t.Fatalf("next build ran with telemetry on:\n%s", d.Log)
	}

	first := time.Now()
	code, body, err := appGetAt(ctx, s.url, "next", "/")
	t.Logf("first request to the release: %s", time.Since(first).Round(time.Millisecond))
	sum := sha256.Sum256([]byte("pandastack next e2e"))
	want := "next app sum " + hex.EncodeToString(sum[:])[:16]
	if err != nil || code != 200 || !strings.Contains(body, want) || !strings.Contains(body, "waiting for hydration") {
		t.Fatalf("GET next.apps.localhost/: %d %v, want the server-rendered %q\n%s", code, err, want, body)
	}
	// The built page loads the client bundle Next emitted.
	if !strings.Contains(body, `/_next/static/`) {
		t.Fatalf("the served page loads no built bundle:\n%s", body)
	}
	if strings.Contains(body, "hydrated in the browser") {
		t.Fatalf("the served page already holds the client's text:\n%s", body)
	}
	if i := strings.Index(body, "built by node "); i >= 0 {
		t.Logf("the page says: %s", body[i:i+len("built by node v20.19.2")])
	}
	u, err := neturl.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	dom := renderedDOM(t, "http://next.apps.localhost:"+u.Port()+"/")
	if !strings.Contains(dom, `<p id="client">hydrated in the browser: 42</p>`) || !strings.Contains(dom, want) {
		t.Fatalf("Chromium's rendering of the app does not show the hydrated client component:\n%s", dom)
	}
	if err := c.DeleteApp(ctx, "next"); err != nil {
		t.Fatal(err)
	}
}
