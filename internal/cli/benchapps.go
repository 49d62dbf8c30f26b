package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// appsBenchResult is what `pandastack bench --apps` prints: the app
// hosting product's figures, client measured through the API port's
// router (requests carry the app's Host header), with the same run's
// floors so the ratios are honest on a shared machine.
type appsBenchResult struct {
	Accel   string `json:"accel"`
	Machine string `json:"machine"`
	Date    string `json:"date"`
	N       int    `json:"n"`
	// A git push to the app's own remote until the first 200 that shows
	// the pushed version: clone, detect, build VM, start, health check,
	// snapshot, restore, switch. The first deploy of the app, then a
	// redeploy (blue-green: the first release serves until the switch).
	DeployFirstMs float64 `json:"app_deploy_push_to_200_ms"`
	RedeployMs    float64 `json:"app_redeploy_push_to_200_ms"`
	// Requests to the running release, one after another on a kept-alive
	// connection (Requests of them).
	Requests    int     `json:"app_requests"`
	WarmP50     float64 `json:"app_warm_request_p50_ms"`
	WarmP99     float64 `json:"app_warm_request_p99_ms"`
	HealthP50   float64 `json:"api_health_p50_ms"`
	WarmFloorRx float64 `json:"app_warm_health_ratio"`
	// The floor under a warm request: a GET to the same kind of server
	// (python3 -m http.server) in a plain sandbox through its port proxy.
	ProxyFloorP50  float64 `json:"sandbox_proxy_http_p50_ms"`
	WarmProxyRatio float64 `json:"app_warm_proxy_floor_ratio"`
	// The first request after the release hibernated (scale to zero):
	// until its answer, the wake included; N of them.
	WakeP50 float64 `json:"app_wake_first_request_p50_ms"`
	WakeP99 float64 `json:"app_wake_first_request_p99_ms"`
	// The floor under a wake: a plain sandbox of the base template
	// hibernated and woken through the API (until its agent answers).
	SandboxWakeP50   float64 `json:"sandbox_wake_p50_ms"`
	WakeFloorRatio   float64 `json:"app_wake_floor_ratio"`
	CreateFloorP50   float64 `json:"create_floor_p50_ms"`
	DeployFloorRatio float64 `json:"app_redeploy_create_floor_ratio"`
	// Rollback call until the previous version serves: with the target
	// release still running (just replaced) and hibernated (idle).
	Rollbacks             int     `json:"app_rollbacks"`
	RollbackWarmP50       float64 `json:"app_rollback_warm_p50_ms"`
	RollbackHibernatedP50 float64 `json:"app_rollback_hibernated_p50_ms"`
	// 2,000 requests at 50 a second across a redeploy (benchapps_load.go).
	appLoadResult
}

// benchAppSource is the benched app: a Python standard-library server
// (no registry needed) that answers its version.
const benchAppSource = `import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"bench VERSION"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 128  # the listen backlog (Python's default is 5)
    daemon_threads = True
S(("", int(os.environ["PORT"])), H).serve_forever()
`

// benchAppIdle is the benched app's auto-hibernate: short, so the wakes
// do not take the run's whole time.
const benchAppIdle = 2

// appBench drives one app through the API and its router.
type appBench struct {
	c    *sdk.Client
	key  string
	name string
	app  *sdk.App
	work string // the local repository pushed from
	// files is the app's source, VERSION replaced (nil: benchAppSource as
	// main.py).
	files map[string]string
	keep  *http.Client
	fresh *http.Client
}

// benchApps measures the app product with an app of its own (deleted at
// the end): two deploys by git push, warm requests, n wakes after scale
// to zero, rollbacks; 2,000 requests at 50/s across a Node app's redeploy;
// then its floors.
func benchApps(ctx context.Context, c *sdk.Client, key string, n int, progress func(string, ...any)) (*appsBenchResult, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, fmt.Errorf("bench --apps pushes with git: %w", err)
	}
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	res := &appsBenchResult{Accel: h.Accel, Machine: machine(), Date: time.Now().UTC().Format("2006-01-02"), N: n, Requests: 10 * n}
	b := &appBench{c: c, key: key, name: fmt.Sprintf("bench-app-%d", time.Now().UnixNano()%1e6),
		keep:  &http.Client{Timeout: 2 * time.Minute},
		fresh: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}}
	if b.work, err = os.MkdirTemp("", "pandastack-bench-app-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(b.work)
	auto := benchAppIdle
	if b.app, err = c.CreateApp(ctx, sdk.CreateAppParams{Name: b.name, HealthTimeoutSeconds: 120, AutoHibernateSeconds: auto}); err != nil {
		return nil, fmt.Errorf("create app: %w", err)
	}
	defer func() { _ = c.DeleteApp(context.WithoutCancel(ctx), b.name) }()
	if err := b.git("init", "--quiet", "--initial-branch=main", "."); err != nil {
		return nil, err
	}

	progress("deploy by git push until the first 200 (then a redeploy)")
	if res.DeployFirstMs, err = b.deploy(ctx, "v1"); err != nil {
		return nil, err
	}
	if res.RedeployMs, err = b.deploy(ctx, "v2"); err != nil {
		return nil, err
	}

	progress("%d warm requests through the router, and GET /v1/health as their floor", res.Requests)
	var warm, health []float64
	for i := range res.Requests + 1 {
		d, err := b.get(ctx, b.keep, "v2")
		if err != nil {
			return nil, err
		}
		if i > 0 { // the first may open the connection
			warm = append(warm, d)
		}
		t0 := time.Now()
		if _, err := c.Health(ctx); err != nil {
			return nil, err
		}
		if i > 0 {
			health = append(health, ms(time.Since(t0)))
		}
	}
	res.WarmP50, res.WarmP99, res.HealthP50 = pct(warm, 50), pct(warm, 99), pct(health, 50)
	res.WarmFloorRx = ratio(res.WarmP50, res.HealthP50)
	b.keep.CloseIdleConnections() // an open connection keeps the release awake

	progress("%d first requests after the release hibernated (idle %d s)", n, auto)
	var wakes []float64
	for range n {
		if err := b.waitState(ctx, "", "hibernated"); err != nil {
			return nil, err
		}
		d, err := b.get(ctx, b.fresh, "v2")
		if err != nil {
			return nil, err
		}
		wakes = append(wakes, d)
	}
	res.WakeP50, res.WakeP99 = pct(wakes, 50), pct(wakes, 99)

	res.Rollbacks = min(n, 5)
	progress("%d rollbacks to a running release and %d to a hibernated one", res.Rollbacks, res.Rollbacks)
	var rbWarm, rbCold []float64
	want := map[string]string{"v1": "v2", "v2": "v1"}
	serving := "v2"
	for range res.Rollbacks {
		// First to the idle previous release, hibernated by then; then
		// back at once to the one just replaced, still running.
		for _, hibernated := range []bool{true, false} {
			target := want[serving]
			if hibernated {
				if err := b.waitState(ctx, "previous", "hibernated"); err != nil {
					return nil, err
				}
				// The live release went idle as long as the previous
				// one and may have scaled to zero too: one request
				// wakes it, so the rollback back to it that follows is
				// to a running release, as its figure says.
				if _, err := b.get(ctx, b.fresh, serving); err != nil {
					return nil, fmt.Errorf("the live release %s before a rollback: %w", serving, err)
				}
			}
			d, err := b.rollback(ctx, target)
			if err != nil {
				return nil, err
			}
			if hibernated {
				rbCold = append(rbCold, d)
			} else {
				rbWarm = append(rbWarm, d)
			}
			serving = target
		}
	}
	res.RollbackWarmP50, res.RollbackHibernatedP50 = pct(rbWarm, 50), pct(rbCold, 50)

	progress("%d requests at %d/s, open loop, across a redeploy of a Node app", appLoadRequests, appLoadRate)
	if res.appLoadResult, err = benchLoad(ctx, c, key); err != nil {
		return nil, fmt.Errorf("load across a deploy: %w", err)
	}

	progress("floors: %d plain sandbox wakes, HTTP through its port proxy, and %d creates from the base template", n, n)
	if res.SandboxWakeP50, res.ProxyFloorP50, err = sandboxFloors(ctx, c, key, n); err != nil {
		return nil, fmt.Errorf("sandbox floors: %w", err)
	}
	res.WarmProxyRatio = ratio(res.WarmP50, res.ProxyFloorP50)
	if res.CreateFloorP50, _, err = createFloor(ctx, c, n); err != nil {
		return nil, fmt.Errorf("create floor: %w", err)
	}
	res.WakeFloorRatio = ratio(res.WakeP50, res.SandboxWakeP50)
	res.DeployFloorRatio = ratio(res.RedeployMs, res.CreateFloorP50)
	return res, nil
}

// deploy commits the app at version, pushes it to the app's remote and
// returns the ms until a request answers that version.
func (b *appBench) deploy(ctx context.Context, version string) (float64, error) {
	files := map[string]string{"main.py": benchAppSource}
	if b.files != nil {
		files = b.files
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(b.work, name), []byte(strings.ReplaceAll(src, "VERSION", version)), 0o644); err != nil {
			return 0, err
		}
	}
	if err := b.git("add", "-A"); err != nil {
		return 0, err
	}
	if err := b.git("commit", "--quiet", "-m", version); err != nil {
		return 0, err
	}
	remote, err := b.remote()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := b.git("push", "--quiet", remote, "main"); err != nil {
		return 0, err
	}
	ds, err := b.c.ListDeploys(ctx, b.name)
	if err != nil || len(ds) == 0 {
		return 0, fmt.Errorf("the push queued no deploy: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	for {
		if _, err := b.get(wctx, b.fresh, version); err == nil {
			return ms(time.Since(t0)), nil
		}
		d, err := b.c.GetDeploy(wctx, b.name, ds[0].ID)
		if err != nil {
			return 0, err
		}
		if d.Status == sdk.DeployFailed {
			return 0, fmt.Errorf("deploy %s failed: %s\n%s", d.ID, d.Error, d.Log)
		}
		select {
		case <-wctx.Done():
			return 0, fmt.Errorf("deploy %s of %s: still %s: %w", d.ID, version, d.Status, wctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rollback rolls the app back and returns the ms until version serves.
func (b *appBench) rollback(ctx context.Context, version string) (float64, error) {
	t0 := time.Now()
	if _, err := b.c.RollbackApp(ctx, b.name, ""); err != nil {
		return 0, fmt.Errorf("rollback to %s: %w", version, err)
	}
	for {
		if _, err := b.get(ctx, b.fresh, version); err == nil {
			return ms(time.Since(t0)), nil
		}
		if time.Since(t0) > 2*time.Minute {
			return 0, fmt.Errorf("after the rollback %s does not serve", version)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get sends GET / with the app's Host header and returns its ms; an
// answer other than 200 with version is an error (not measured).
func (b *appBench) get(ctx context.Context, hc *http.Client, version string) (float64, error) {
	u, err := url.Parse(b.app.URL)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(b.c.BaseURL(), "/")+"/", nil)
	if err != nil {
		return 0, err
	}
	req.Host = u.Host
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := ms(time.Since(t0))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != 200 || string(body) != "bench "+version {
		err := fmt.Errorf("GET %s/: %d %.200q, want 200 %q", u.Host, resp.StatusCode, body, "bench "+version)
		return 0, err
	}
	return d, nil
}

// waitState waits until the app's live release ("") or the release that
// is not live ("previous") is in state.
func (b *appBench) waitState(ctx context.Context, which, state string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a, err := b.c.GetApp(ctx, b.name)
		if err != nil {
			return err
		}
		sbs, err := b.c.ListSandboxes(ctx, sdk.ListParams{Metadata: map[string]string{"app": b.name, "role": "release"}})
		if err != nil {
			return err
		}
		for _, sb := range sbs {
			live := sb.Metadata["deploy"] == a.LiveDeployID
			if live == (which == "") && string(sb.State) == state {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the app's %s release did not become %s", map[bool]string{true: "live", false: "previous"}[which == ""], state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remote is the app's git remote URL with the API key as its password.
func (b *appBench) remote() (string, error) {
	u, err := url.Parse(b.c.BaseURL())
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + b.app.GitRemote
	u.User = url.UserPassword("pandastack", b.key)
	return u.String(), nil
}

func (b *appBench) git(args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = b.work
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost", "GIT_COMMITTER_NAME=bench",
		"GIT_COMMITTER_EMAIL=bench@localhost", "GIT_CONFIG_NOSYSTEM=1", "HOME="+b.work, "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		// The remote URL holds the key: never print the arguments of a push.
		return fmt.Errorf("git %s: %v: %s", args[0], err, strings.ReplaceAll(string(out), b.key, "[key]"))
	}
	return nil
}

// sandboxFloors hibernates and wakes a plain base sandbox n times, then
// measures GETs through its port proxy to a python3 -m http.server in it
// (benchProxy): the wake p50 (until its agent answers) and the GET p50,
// in ms.
func sandboxFloors(ctx context.Context, c *sdk.Client, key string, n int) (wake, proxy float64, err error) {
	sb, err := floorSandbox(ctx, c)
	if err != nil {
		return 0, 0, err
	}
	defer sb.Kill(context.WithoutCancel(ctx))
	xs, err := wakeSamples(ctx, sb, n)
	if err != nil {
		return 0, 0, err
	}
	if proxy, err = benchProxy(ctx, c, key, sb); err != nil {
		return 0, 0, fmt.Errorf("proxy: %w", err)
	}
	return pct(xs, 50), proxy, nil
}
