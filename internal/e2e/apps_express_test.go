package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// testExpressApp deploys a real Express app from git on s (a server whose
// build machines reach the npm registry): it is detected as node, its
// lockfile installs express with `npm ci` inside the build VM, and its
// JSON route answers through the router by Host header; its start script
// runs through `node --run` after its prestart script, as npm would run
// them (what prestart wrote, the app serves). Run inside TestAppsVite,
// whose server it shares.
func testExpressApp(t *testing.T, s *serverProc, c *sdk.Client, gs *gitServer) {
	ctx := context.Background()
	lock, err := os.ReadFile("testdata/express-package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	url := gs.push("express", "main", map[string]string{
		"package.json": `{"name": "express-e2e", "private": true, "scripts": {"prestart": "node -e \"require('fs').writeFileSync('prestart.txt', 'ran')\"", "start": "node index.js"},
  "dependencies": {"express": "4.21.2"}}`,
		"package-lock.json": string(lock),
		"index.js": `const express = require("express");
const app = express();
app.get("/", (req, res) => res.send("express is up"));
app.get("/api/hello", (req, res) => res.json({ hello: req.query.name || "world", express: require("express/package.json").version,
  prestart: require("fs").readFileSync("prestart.txt", "utf8") }));
app.listen(process.env.PORT);
`,
	})
	if _, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "express", GitURL: url}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteApp(context.WithoutCancel(ctx), "express")
	start := time.Now()
	d := deployAndWait(t, c, "express", "")
	if d.Status != sdk.DeployLive || d.Framework != "node" || !strings.Contains(d.Log, "$ npm ci") ||
		!strings.Contains(d.Log, "node --run prestart && node --run start") {
		t.Fatalf("express deploy: %+v\n%s", d, d.Log)
	}
	t.Logf("express app deploy (npm ci of express in the build VM under TCG): %s\n%s", time.Since(start).Round(time.Second), steps(d.Log))
	code, body, err := appGetAt(ctx, s.url, "express", "/api/hello?name=e2e")
	if err != nil || code != 200 {
		t.Fatalf("GET express.apps.localhost/api/hello: %d %v %s", code, err, body)
	}
	var got struct{ Hello, Express, Prestart string }
	if err := json.Unmarshal([]byte(body), &got); err != nil || got.Hello != "e2e" || got.Express != "4.21.2" || got.Prestart != "ran" {
		t.Fatalf("the JSON route answered %s (%v), want hello e2e from express 4.21.2, after prestart ran", body, err)
	}
}
