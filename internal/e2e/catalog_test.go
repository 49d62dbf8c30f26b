package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/templates"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// sh runs a shell command in sb and fails the test unless it exits 0.
func sh(t *testing.T, sb *sdk.Sandbox, cmd string, timeout float64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout+60)*time.Second)
	defer cancel()
	r, err := sb.Exec(ctx, cmd, sdk.ExecOptions{TimeoutSeconds: timeout})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("%s: exit %d (timed out %v)\nstdout: %s\nstderr: %s", cmd, r.ExitCode, r.TimedOut, r.Stdout, r.Stderr)
	}
	return string(r.Stdout)
}

// The base template has what its description promises: Python, Node, Go,
// git and a C toolchain, and they work (a Go program builds and runs).
func TestTemplateBaseToolchains(t *testing.T) {
	sb := newSandbox(t, teamClient(t, "tpl-base"), sdk.CreateSandboxParams{Template: template})
	out := sh(t, sb, "python3 --version && node --version && go version && git --version && gcc --version | head -1", 60)
	for _, want := range []string{"Python 3.", "v", "go version go1.", "git version", "gcc"} {
		if !strings.Contains(out, want) {
			t.Fatalf("toolchain versions %q lack %q", out, want)
		}
	}
	// `node` is the pinned official release, with Node's startup snapshot
	// (Debian's nodejs has none: BENCHMARKS.md, Session 18), and npm runs
	// on it.
	out = sh(t, sb, `node -p 'process.version + " " + process.config.variables.node_use_node_snapshot' && npm --version && command -v node`, 120)
	if want := "v" + templates.Node.Version + " true\n"; !strings.HasPrefix(out, want) || !strings.HasSuffix(out, templates.NodePath+"\n") {
		t.Fatalf("node and npm: %q, want it to start %q and end with %s", out, want, templates.NodePath)
	}
	prog := `package main

import "fmt"

func main() { fmt.Println("hello from go", 6*7) }
`
	if _, err := sb.Files().Write(context.Background(), "/root/hello/main.go", []byte(prog)); err != nil {
		t.Fatal(err)
	}
	out = sh(t, sb, "cd /root/hello && HOME=/root GOCACHE=/tmp/gocache go run main.go", 600)
	if strings.TrimSpace(out) != "hello from go 42" {
		t.Fatalf("go run printed %q", out)
	}
}

func TestTemplatePostgres(t *testing.T) {
	needTemplate(t, "postgres")
	sb := newSandbox(t, teamClient(t, "tpl-postgres"), sdk.CreateSandboxParams{Template: "postgres"})
	// The server is up the moment the sandbox is: it runs in the bake.
	if out := sh(t, sb, "pg_isready -h 127.0.0.1", 30); !strings.Contains(out, "accepting connections") {
		t.Fatalf("pg_isready: %s", out)
	}
	out := sh(t, sb, `psql -U postgres -h 127.0.0.1 -v ON_ERROR_STOP=1 -Atc "
create extension vector;
create table items (id int primary key, embedding vector(3));
insert into items values (1, '[1,1,1]'), (2, '[5,5,5]'), (3, '[1,2,1]');
select id from items order by embedding <-> '[1,2,2]' limit 2;"`, 120)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Join(lines[len(lines)-2:], ","); got != "3,1" {
		t.Fatalf("nearest neighbours %q, want 3,1; output:\n%s", got, out)
	}
}

func TestTemplateAgent(t *testing.T) {
	needTemplate(t, "agent")
	sb := newSandbox(t, teamClient(t, "tpl-agent"), sdk.CreateSandboxParams{Template: "agent"})
	version := regexp.MustCompile(`\d+\.\d+\.\d+`)
	for _, cli := range []string{"claude", "codex", "opencode"} {
		out := sh(t, sb, cli+" --version", 300)
		if !version.MatchString(out) {
			t.Errorf("%s --version printed %q", cli, out)
		}
		t.Logf("%s --version: %s", cli, strings.TrimSpace(out))
	}
}

// shotJS loads the page served in the sandbox in headless Chromium through
// playwright-core, prints its title and heading and saves a screenshot.
const shotJS = `const { chromium } = require('playwright-core');
(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], timeout: 300000 });
  const page = await browser.newPage({ viewport: { width: 640, height: 480 } });
  await page.goto('http://127.0.0.1:8000/', { timeout: 300000 });
  console.log(JSON.stringify({ title: await page.title(), heading: await page.textContent('h1') }));
  await page.screenshot({ path: '/work/shot.png', timeout: 300000 });
  await browser.close();
})().catch((e) => { console.error(e); process.exit(1); });
`

func TestTemplateBrowser(t *testing.T) {
	needTemplate(t, "browser")
	ctx := context.Background()
	sb := newSandbox(t, teamClient(t, "tpl-browser"), sdk.CreateSandboxParams{Template: "browser"})
	sh(t, sb, "mkdir -p /work/site", 30)
	page := `<!doctype html><html><head><title>PandaStack page</title></head><body><h1>Hello from the sandbox</h1></body></html>`
	if _, err := sb.Files().Write(ctx, "/work/site/index.html", []byte(page)); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Files().Write(ctx, "/work/shot.js", []byte(shotJS)); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.StartBackground(ctx, "python3 -m http.server 8000 --bind 127.0.0.1 --directory /work/site", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	sh(t, sb, "for i in $(seq 1 300); do curl -sf http://127.0.0.1:8000/ >/dev/null && exit 0; sleep 0.2; done; exit 1", 120)
	t0 := time.Now()
	out := sh(t, sb, "cd /work && node shot.js", 900)
	t.Logf("page load and screenshot took %v", time.Since(t0))
	var got struct{ Title, Heading string }
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	if got.Title != "PandaStack page" || got.Heading != "Hello from the sandbox" {
		t.Fatalf("page %+v", got)
	}
	b, err := sb.Files().Read(ctx, "/work/shot.png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() != 640 || r.Dy() != 480 {
		t.Fatalf("screenshot is %dx%d, want 640x480", r.Dx(), r.Dy())
	}
}
