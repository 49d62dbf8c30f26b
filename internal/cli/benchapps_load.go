package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// Load across a deploy, as the issue counts it: appLoadRequests requests
// at appLoadRate a second while the app redeploys.
const (
	appLoadRequests = 2000
	appLoadRate     = 50
	// appLoadDeployAfter is how far into the load the redeploy's push
	// goes: the switch and the replaced release's drain then fall well
	// inside the load's 40 s.
	appLoadDeployAfter = 2 * time.Second
)

// benchLoadSource is the app the load goes to: Node's own HTTP server (no
// registry needed), whose event loop serves 50 requests a second on one
// TCG vCPU with room to spare, so the figure is the deploy's and not the
// app's capacity (a thread per request, as the Python app's server, does
// not keep up under TCG on a loaded host).
var benchLoadSource = map[string]string{
	"package.json": `{"name": "bench-load", "private": true, "scripts": {"start": "node server.js"}}`,
	"server.js": `const body = Buffer.from("bench VERSION");
require("http").createServer((req, res) => {
  res.writeHead(200, {"Content-Length": body.length});
  res.end(body);
}).listen(process.env.PORT);
`,
}

// benchLoad deploys a Node app of its own (deleted after) at v1 and
// measures the load across its redeploy to v2.
func benchLoad(ctx context.Context, c *sdk.Client, key string) (appLoadResult, error) {
	b := &appBench{c: c, key: key, name: fmt.Sprintf("bench-load-%d", time.Now().UnixNano()%1e6), files: benchLoadSource,
		fresh: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}}
	var err error
	if b.work, err = os.MkdirTemp("", "pandastack-bench-load-"); err != nil {
		return appLoadResult{}, err
	}
	defer os.RemoveAll(b.work)
	// No scale to zero: the load measures the deploy, not a wake.
	if b.app, err = c.CreateApp(ctx, sdk.CreateAppParams{Name: b.name, HealthTimeoutSeconds: 120, StartCommand: "node server.js"}); err != nil {
		return appLoadResult{}, fmt.Errorf("create app: %w", err)
	}
	defer func() { _ = c.DeleteApp(context.WithoutCancel(ctx), b.name) }()
	if err := b.git("init", "--quiet", "--initial-branch=main", "."); err != nil {
		return appLoadResult{}, err
	}
	if _, err := b.deploy(ctx, "v1"); err != nil {
		return appLoadResult{}, err
	}
	return b.loadAcrossDeploy(ctx, "v1", "v2")
}

// appLoadResult is the load-across-a-deploy part of `bench --apps`.
type appLoadResult struct {
	// LoadRequests requests are sent open loop: request i leaves at
	// start + i/LoadRate whatever the earlier ones are doing (a slow
	// answer does not slow the load), each on a pooled keep-alive
	// connection. A request fails unless it is answered 200 with the old
	// or the new version.
	LoadRequests int     `json:"app_load_requests"`
	LoadRate     float64 `json:"app_load_rate_per_s"`
	LoadFailed   int     `json:"app_load_failed"`
	// LoadFirstFailure says what the first failed request got.
	LoadFirstFailure string `json:"app_load_first_failure,omitempty"`
	// Latency from each request's scheduled time (so a stall counts for
	// the requests queued behind it) to its whole answer.
	LoadP50 float64 `json:"app_load_p50_ms"`
	LoadP99 float64 `json:"app_load_p99_ms"`
	LoadMax float64 `json:"app_load_max_ms"`
	// LoadNewVersion requests were answered by the new release.
	LoadNewVersion int `json:"app_load_answered_by_new_release"`
	// LoadDeployMs: the redeploy's push until the first 200 of the new
	// version, under the load.
	LoadDeployMs float64 `json:"app_load_redeploy_push_to_200_ms"`
	// LoadLagMaxMs is how late the sender was at worst against its
	// schedule (a loaded client would make the rate a lie).
	LoadLagMaxMs float64 `json:"app_load_send_lag_max_ms"`
	// The load by phase, by when each request was scheduled: before the
	// push, from the push until the new version first answered, and after:
	// failures in the first phase are the app's capacity on this machine,
	// not the deploy.
	LoadPhases []appLoadPhase `json:"app_load_phases"`
}

// appLoadPhase is the requests of one phase of the load.
type appLoadPhase struct {
	Phase    string  `json:"phase"`
	Requests int     `json:"requests"`
	Failed   int     `json:"failed"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
}

// loadAcrossDeploy sends the load to the app, which serves from, and
// redeploys it as to appLoadDeployAfter into the load.
func (b *appBench) loadAcrossDeploy(ctx context.Context, from, to string) (appLoadResult, error) {
	res := appLoadResult{LoadRequests: appLoadRequests, LoadRate: appLoadRate}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	// The release may have hibernated while idle: wake it first, so the
	// load measures the deploy, not a wake.
	if _, err := b.get(ctx, hc, from); err != nil {
		return res, fmt.Errorf("before the load: %w", err)
	}
	type outcome struct {
		at  time.Duration // scheduled, from the start
		ms  float64
		new bool
		err error
	}
	out := make([]outcome, appLoadRequests)
	interval := time.Second / appLoadRate
	var wg sync.WaitGroup
	deployed := make(chan error, 1)
	start := time.Now()
	var switched time.Duration // from the start until the new version answered
	go func() {
		select {
		case <-time.After(appLoadDeployAfter):
		case <-ctx.Done():
			deployed <- ctx.Err()
			return
		}
		t0 := time.Now()
		d, err := b.deploy(ctx, to)
		res.LoadDeployMs, switched = d, t0.Add(time.Duration(d*float64(time.Millisecond))).Sub(start)
		deployed <- err
	}()
	for i := range appLoadRequests {
		at := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		if lag := ms(time.Since(at)); lag > res.LoadLagMaxMs {
			res.LoadLagMaxMs = lag
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			isNew, err := b.getEither(ctx, hc, from, to)
			out[i] = outcome{at: at.Sub(start), ms: ms(time.Since(at)), new: isNew, err: err}
		}()
	}
	wg.Wait()
	if err := <-deployed; err != nil {
		return res, fmt.Errorf("redeploy under load: %w", err)
	}
	phases := []struct {
		name     string
		from, to time.Duration
		lat      []float64
		failed   int
	}{{name: "before the push", to: appLoadDeployAfter}, {name: "push until the new version answered", from: appLoadDeployAfter, to: switched},
		{name: "after the switch", from: switched, to: time.Duration(1 << 62)}}
	var lat []float64
	for _, o := range out {
		for i := range phases {
			if o.at >= phases[i].from && o.at < phases[i].to {
				phases[i].lat = append(phases[i].lat, o.ms)
				if o.err != nil {
					phases[i].failed++
				}
			}
		}
		lat = append(lat, o.ms)
		res.LoadMax = max(res.LoadMax, o.ms)
		switch {
		case o.err != nil:
			res.LoadFailed++
			if res.LoadFirstFailure == "" {
				res.LoadFirstFailure = o.err.Error()
			}
		case o.new:
			res.LoadNewVersion++
		}
	}
	res.LoadP50, res.LoadP99 = pct(lat, 50), pct(lat, 99)
	for _, ph := range phases {
		res.LoadPhases = append(res.LoadPhases, appLoadPhase{Phase: ph.name, Requests: len(ph.lat), Failed: ph.failed,
			P50: pct(ph.lat, 50), P99: pct(ph.lat, 99)})
	}
	return res, nil
}

// getEither sends one GET / with the app's Host header; it must be
// answered 200 with version from or to (isNew: to).
func (b *appBench) getEither(ctx context.Context, hc *http.Client, from, to string) (isNew bool, err error) {
	u, err := url.Parse(b.app.URL)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(b.c.BaseURL(), "/")+"/", nil)
	if err != nil {
		return false, err
	}
	req.Host = u.Host
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return false, err
	case resp.StatusCode == 200 && string(body) == "bench "+to:
		return true, nil
	case resp.StatusCode == 200 && string(body) == "bench "+from:
		return false, nil
	}
	return false, fmt.Errorf("GET %s/: %d %.200q, want 200 with %q or %q", u.Host, resp.StatusCode, body, "bench "+from, "bench "+to)
}
