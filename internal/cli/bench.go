package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// benchResult is what `pandastack bench --json` prints.
type benchResult struct {
	Template      string  `json:"template"`
	Accel         string  `json:"accel"`
	Machine       string  `json:"machine"`
	Date          string  `json:"date"`
	Creates       int     `json:"creates"`
	CreateP50     float64 `json:"create_p50_ms"`
	CreateP99     float64 `json:"create_p99_ms"`
	CreateExecP50 float64 `json:"create_exec_p50_ms"`
	CreateExecP99 float64 `json:"create_exec_p99_ms"`
	ExecP50       float64 `json:"exec_p50_ms"`
	ExecP99       float64 `json:"exec_p99_ms"`
	AgentPingP50  float64 `json:"agent_ping_p50_ms"`
	// A runtime's start in a running sandbox: `python3 -c 0` and
	// `node -e 0` run through the agent, exec included (0: the template
	// lacks it).
	PythonStartP50   float64 `json:"python_start_p50_ms"`
	NodeStartP50     float64 `json:"node_start_p50_ms"`
	Parallel20       float64 `json:"parallel20_ms"`
	ColdBoot         float64 `json:"cold_boot_ms"`
	CreateColdRatio  float64 `json:"create_cold_ratio"`
	ProxyHTTPP50     float64 `json:"proxy_http_p50_ms"`
	ProxyRPS         float64 `json:"proxy_rps"`
	Hibernate        float64 `json:"hibernate_ms"`
	WakeP50          float64 `json:"wake_p50_ms"`
	ForkP50          float64 `json:"fork_p50_ms"`
	ForkDirty200P50  float64 `json:"fork_dirty200_p50_ms"`
	ServerCreateNote string  `json:"note"`
	// TemplateBuildMs is how long the build that made the template's bake
	// took, as the builder recorded it (cold only if its cache was empty).
	TemplateBuildMs int64 `json:"template_build_ms"`
	// CreateOnly is set when only creates were measured (--create-only).
	CreateOnly bool `json:"create_only,omitempty"`
	benchFloors
}

// runBench: `pandastack bench`, latency of the sandbox lifecycle against a
// running server, measured in one run so ratios are fair.
func runBench(ctx context.Context, s *streams, args []string) (code int) {
	p := newParser("bench", "", "Measure create, exec and cold-boot latency against a running server (admin key for the cold boot).").withClient(ctx)
	tpl := p.fs.String("template", "base", "template to measure")
	n := p.fs.Int("n", 50, "sequential creates to measure")
	asJSON := p.fs.Bool("json", false, "print one JSON object")
	cold := p.fs.Int("cold", 3, "cold boots to measure (the median is reported)")
	custom := p.fs.Bool("custom", false, "instead: measure a custom template build from --template (cold, cached rebuilds) and a size variant (admin key)")
	createOnly := p.fs.Bool("create-only", false, "measure only create p50/p99 (and report the template's build time)")
	compare := p.fs.String("compare", "", "a stored `bench --json` run: print each figure's ratio to it and exit 1 if any is worse than --threshold")
	threshold := p.fs.Float64("threshold", 1.3, "with --compare: the ratio (now ÷ stored, inverted for throughput) past which a figure has regressed")
	from := p.fs.String("from", "", "with --compare: compare this stored run instead of measuring one (no server needed)")
	density := p.fs.Bool("density", false, "instead: start idle sandboxes of --template until --max or the host's memory says stop, and report memory and CPU per idle sandbox and exec latency at that density (admin key)")
	maxN := p.fs.Int("max", 200, "with --density: the most sandboxes to start")
	marginMiB := p.fs.Int("margin-mib", 6144, "with --density: stop before the host's MemAvailable falls below this")
	idleWindow := p.fs.Int("idle-window", 10, "with --density: seconds over which idle CPU is measured")
	pressure := p.fs.Float64("pressure", 5, "with --density: stop once the host's memory pressure (the share of the last 10 s some task stalled on memory) reaches this percentage (0: never)")
	functions := p.fs.Bool("functions", false, "instead: deploy hello-world functions and measure deploy, fresh and warm invocations (--n each), 20 at once, and --cron-runs of a per-second schedule")
	cronRuns := p.fs.Int("cron-runs", 50, "with --functions: runs of the per-second schedule to measure (0: none)")
	dbs := p.fs.Bool("databases", false, "instead: measure managed databases: --db-n creates until the first query, wakes, forks, and warm SQL-over-HTTP queries")
	dbN := p.fs.Int("db-n", 5, "with --databases: creates, wakes and forks to measure")
	dbHost := p.fs.String("db-host", "", "with --databases: where the database router listens (default: the server's host)")
	appsPart := p.fs.Bool("apps", false, "instead: deploy a Python app by git push and measure deploy and redeploy until the first 200, warm requests through the router, --app-n first requests after scale to zero, rollbacks, and 2,000 requests at 50/s (open loop) across a redeploy, with a plain sandbox wake and create as floors (needs git)")
	appN := p.fs.Int("app-n", 10, "with --apps: wakes to measure (10× as many warm requests; up to 5 rollbacks of each kind)")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	if *from != "" {
		if *compare == "" {
			fmt.Fprintln(s.err, "error: --from goes with --compare")
			return 2
		}
		cur, err := os.ReadFile(*from)
		if err != nil {
			fmt.Fprintf(s.err, "error: read %s: %v\n", *from, err)
			return 2
		}
		return benchCompare(s, *compare, cur, *threshold)
	}
	c := p.client.client()
	if *dbs {
		host := *dbHost
		if host == "" {
			host = routerHostOf(c.BaseURL())
		}
		res, err := benchDatabases(ctx, c, max(*dbN, 1), host, func(f string, a ...any) { fmt.Fprintf(s.err, f+"\n", a...) })
		if err != nil {
			return fail(s, err)
		}
		printJSON(s.out, res)
		return 0
	}
	if *appsPart {
		res, err := benchApps(ctx, c, p.client.key(), max(*appN, 1), func(f string, a ...any) { fmt.Fprintf(s.err, f+"\n", a...) })
		if err != nil {
			return fail(s, err)
		}
		printJSON(s.out, res)
		return 0
	}
	if *functions {
		res, err := benchFunctions(ctx, c, *n, *cronRuns, func(f string, a ...any) { fmt.Fprintf(s.err, f+"\n", a...) })
		if err != nil {
			return fail(s, err)
		}
		printJSON(s.out, res)
		return 0
	}
	if *custom {
		res, err := benchCustom(ctx, c, *tpl, s)
		if err != nil {
			return fail(s, err)
		}
		printJSON(s.out, res)
		return 0
	}
	if *density {
		if *maxN < 1 || *marginMiB < 0 || *idleWindow < 1 || *pressure < 0 || *pressure > 100 {
			fmt.Fprintln(s.err, "error: --max and --idle-window must be at least 1, --margin-mib at least 0, --pressure between 0 and 100")
			return 2
		}
		progress := func(f string, a ...any) { fmt.Fprintf(s.err, f+"\n", a...) }
		res, err := benchDensity(ctx, c, *tpl, densityLimits{Max: *maxN, MarginKB: int64(*marginMiB) << 10, PressurePct: *pressure}, time.Duration(*idleWindow)*time.Second, progress)
		if res != nil {
			if *asJSON {
				printJSON(s.out, res)
			} else {
				printDensity(s.out, res)
			}
		}
		if err != nil {
			fmt.Fprintf(s.err, "error: %v\n", err)
			return 1
		}
		return 0
	}
	res, err := bench(ctx, c, p.client.key(), *tpl, *n, *cold, *createOnly, s)
	if err != nil {
		fmt.Fprintf(s.err, "error: %v\n", err)
		return 1
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if *asJSON {
		fmt.Fprintln(s.out, string(b))
		if *compare != "" {
			// The table goes to stderr so stdout stays one JSON object.
			return benchCompare(&streams{in: s.in, out: s.err, err: s.err}, *compare, b, *threshold)
		}
		return 0
	}
	defer func() {
		if *compare != "" && code == 0 {
			fmt.Fprintln(s.out)
			code = benchCompare(s, *compare, b, *threshold)
		}
	}()
	fmt.Fprintf(s.out, "template %s on %s, accelerator %s, %s\n\n", res.Template, res.Machine, strings.ToUpper(res.Accel), res.Date)
	if res.CreateOnly {
		fmt.Fprintf(s.out, "  %-40s %.1f / %.1f ms  (n=%d)\n", "create → ready (p50 / p99)", res.CreateP50, res.CreateP99, res.Creates)
		fmt.Fprintf(s.out, "  %-40s %.1f s\n", "template build (as recorded)", float64(res.TemplateBuildMs)/1000)
		fmt.Fprintf(s.out, "  %-40s %.1f ms  (create ÷ floor %.2f)\n", "floor: bare QEMU restore (p50)", res.RestoreFloor, res.CreateFloorRatio)
		return 0
	}
	rows := [][2]string{
		{"create → ready (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms  (n=%d)", res.CreateP50, res.CreateP99, res.Creates)},
		{"template build (as recorded)", fmt.Sprintf("%.1f s", float64(res.TemplateBuildMs)/1000)},
		{"create + first exec(true) (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms", res.CreateExecP50, res.CreateExecP99)},
		{"warm exec(true) (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms", res.ExecP50, res.ExecP99)},
		{"guest agent round trip (p50)", fmt.Sprintf("%.2f ms", res.AgentPingP50)},
		{"python3 -c 0 / node -e 0 (p50)", fmt.Sprintf("%.0f / %.0f ms", res.PythonStartP50, res.NodeStartP50)},
		{"HTTP GET through the port proxy (p50)", fmt.Sprintf("%.1f ms", res.ProxyHTTPP50)},
		{"HTTP GETs through the port proxy (wrk)", fmt.Sprintf("%.0f requests/s", res.ProxyRPS)},
		{"hibernate (p50 of 5)", fmt.Sprintf("%.0f ms", res.Hibernate)},
		{"wake until the agent answers (p50 of 5)", fmt.Sprintf("%.0f ms", res.WakeP50)},
		{"fork until the child answers (p50 of 10)", fmt.Sprintf("%.0f ms", res.ForkP50)},
		{"fork with 200 MiB just written (p50 of 5)", fmt.Sprintf("%.0f ms", res.ForkDirty200P50)},
		{"20 parallel creates, all ready", fmt.Sprintf("%.0f ms", res.Parallel20)},
		{"cold boot of the same template", fmt.Sprintf("%.0f ms", res.ColdBoot)},
		{"create p50 / cold boot", fmt.Sprintf("%.3f", res.CreateColdRatio)},
		{"floor: bare QEMU restore (p50 of 5)", fmt.Sprintf("%.1f ms", res.RestoreFloor)},
		{"floor: 20 bare QEMU restores at once", fmt.Sprintf("%.0f ms", res.Parallel20Floor)},
		{"floor: bare restore until the guest answers", fmt.Sprintf("%.1f ms", res.AnswerFloor)},
		{"floor: 20 of those at once", fmt.Sprintf("%.0f ms", res.Parallel20AnswerFloor)},
		{"floor: spawn /bin/true in the guest", fmt.Sprintf("%.2f ms", res.SpawnFloor)},
		{"floor: pooled restore until answer (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms", res.PooledAnswerFloor, res.PooledAnswerFloorP99)},
		{"floor: that + first /bin/true (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms", res.FirstExecFloor, res.FirstExecFloorP99)},
		{"create ÷ restore floor", fmt.Sprintf("%.2f", res.CreateFloorRatio)},
		{"create + exec ÷ (restore + spawn)", fmt.Sprintf("%.2f", res.CreateExecFloorRatio)},
		{"warm exec ÷ spawn floor", fmt.Sprintf("%.2f", res.ExecFloorRatio)},
		{"20 parallel ÷ 20 bare restores", fmt.Sprintf("%.2f", res.Parallel20FloorRatio)},
		{"create ÷ restore-until-answer floor", fmt.Sprintf("%.2f", res.CreateAnswerFloorRatio)},
		{"20 parallel ÷ 20 restores until answer", fmt.Sprintf("%.2f", res.Parallel20AnswerFloorRatio)},
		{"create p50 / p99 ÷ pooled answer floor", fmt.Sprintf("%.2f / %.2f", res.CreatePooledFloorRatio, res.CreateP99PooledFloorRatio)},
		{"create + exec ÷ first-command floor", fmt.Sprintf("%.2f", res.CreateExecFirstFloorRatio)},
		{"wake ÷ restore floor", fmt.Sprintf("%.2f", res.WakeFloorRatio)},
		{"fork ÷ restore floor", fmt.Sprintf("%.2f", res.ForkFloorRatio)},
	}
	for _, r := range rows {
		fmt.Fprintf(s.out, "  %-40s %s\n", r[0], r[1])
	}
	return 0
}

func bench(ctx context.Context, c *sdk.Client, key, tpl string, n, colds int, createOnly bool, s *streams) (*benchResult, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	res := &benchResult{Template: tpl, Accel: h.Accel, Machine: machine(), Date: time.Now().UTC().Format("2006-01-02"), Creates: n,
		ServerCreateNote: "times measured by the client over HTTP on loopback; create = POST /v1/sandboxes until the guest agent answered"}
	progress := func(f string, a ...any) { fmt.Fprintf(s.err, f+"\n", a...) }
	params := sdk.CreateSandboxParams{Template: tpl, TTLSeconds: 600, Metadata: map[string]string{"bench": "1"}}
	var all []*sdk.Sandbox
	defer func() {
		for _, sb := range all {
			_ = sb.Kill(context.WithoutCancel(ctx))
		}
	}()
	create := func() (*sdk.Sandbox, time.Duration, error) {
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, params)
		d := time.Since(t0)
		if err == nil {
			all = append(all, sb)
		}
		return sb, d, err
	}
	// One unmeasured create: the pool fills and the page cache warms.
	if sb, _, err := create(); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	} else {
		_ = sb.Kill(ctx)
	}
	time.Sleep(time.Second)

	progress("measuring %d creates...", n)
	var creates []float64
	for i := 0; i < n; i++ {
		sb, d, err := create()
		if err != nil {
			return nil, fmt.Errorf("create: %w", err)
		}
		creates = append(creates, msOf(d))
		if err := sb.Kill(ctx); err != nil {
			return nil, err
		}
	}
	res.CreateP50, res.CreateP99 = pct(creates, 50), pct(creates, 99)
	if ts, err := c.Templates(ctx); err == nil {
		for _, t := range ts {
			if t.Name == tpl {
				res.TemplateBuildMs = t.BuildMs
			}
		}
	}
	if createOnly {
		res.CreateOnly = true
		progress("measuring the restore floor...")
		measureRestoreFloor(ctx, c, tpl, 0, res, progress)
		res.setRatios()
		return res, nil
	}

	progress("measuring create + first exec...")
	var ce []float64
	for i := 0; i < max(n/2, 10); i++ {
		t0 := time.Now()
		sb, _, err := create()
		if err != nil {
			return nil, err
		}
		if r, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); err != nil || r.ExitCode != 0 {
			return nil, fmt.Errorf("exec true: %v", err)
		}
		ce = append(ce, msOf(time.Since(t0)))
		_ = sb.Kill(ctx)
	}
	res.CreateExecP50, res.CreateExecP99 = pct(ce, 50), pct(ce, 99)

	progress("measuring warm exec and agent round trips...")
	sb, _, err := create()
	if err != nil {
		return nil, err
	}
	var ex, pings []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		if r, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); err != nil || r.ExitCode != 0 {
			return nil, fmt.Errorf("exec true: %v", err)
		}
		ex = append(ex, msOf(time.Since(t0)))
		p, err := sb.Ping(ctx)
		if err != nil {
			return nil, err
		}
		pings = append(pings, p)
	}
	res.ExecP50, res.ExecP99 = pct(ex, 50), pct(ex, 99)
	res.AgentPingP50 = pct(pings, 50)
	progress("measuring the spawn floor (/bin/true inside the guest)...")
	if res.SpawnFloor, err = spawnFloor(ctx, sb); err != nil {
		return nil, fmt.Errorf("spawn floor: %w", err)
	}

	progress("measuring runtime starts (python3 -c 0, node -e 0)...")
	if res.PythonStartP50, res.NodeStartP50, err = runtimeStarts(ctx, sb, 10); err != nil {
		return nil, fmt.Errorf("runtime starts: %w", err)
	}

	progress("measuring HTTP through the sandbox port proxy...")
	if res.ProxyHTTPP50, err = benchProxy(ctx, c, key, sb); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	progress("measuring proxy throughput with wrk...")
	if res.ProxyRPS, err = benchProxyRPS(ctx, c, key, sb); err != nil {
		return nil, fmt.Errorf("proxy throughput: %w", err)
	}

	progress("measuring hibernate and wake...")
	var hib, wake []float64
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		if err := sb.Hibernate(ctx); err != nil {
			return nil, fmt.Errorf("hibernate: %w", err)
		}
		hib = append(hib, msOf(time.Since(t0)))
		t0 = time.Now()
		if err := sb.Wake(ctx); err != nil {
			return nil, fmt.Errorf("wake: %w", err)
		}
		wake = append(wake, msOf(time.Since(t0)))
	}
	res.Hibernate, res.WakeP50 = pct(hib, 50), pct(wake, 50)

	progress("measuring fork (until the child's agent answers)...")
	var forks []float64
	for i := 0; i < 10; i++ {
		t0 := time.Now()
		kid, err := sb.Fork(ctx)
		if err != nil {
			return nil, fmt.Errorf("fork: %w", err)
		}
		forks = append(forks, msOf(time.Since(t0)))
		_ = kid.Kill(ctx)
	}
	res.ForkP50 = pct(forks, 50)
	progress("measuring fork with 200 MiB of freshly written memory...")
	if res.ForkDirty200P50, err = benchForkDirty(ctx, sb, 5); err != nil {
		return nil, fmt.Errorf("fork with dirty memory: %w", err)
	}
	_ = sb.Kill(ctx)

	progress("measuring 20 parallel creates...")
	time.Sleep(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var perr error
	t0 := time.Now()
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.CreateSandbox(ctx, params)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				perr = err
				return
			}
			all = append(all, sb)
		}()
	}
	wg.Wait()
	res.Parallel20 = msOf(time.Since(t0))
	if perr != nil {
		return nil, fmt.Errorf("parallel create: %w", perr)
	}
	for _, sb := range all {
		_ = sb.Kill(ctx)
	}
	all = nil
	progress("measuring the restore floors (bare QEMU restores on the server's host: 5 one by one, 20 at once)...")
	time.Sleep(time.Second)
	measureRestoreFloor(ctx, c, tpl, 20, res, progress)
	res.setRatios()

	progress("measuring cold boot (%d)...", colds)
	var cb []float64
	for i := 0; i < colds; i++ {
		d, err := c.ColdBoot(ctx, tpl)
		if err != nil {
			return nil, fmt.Errorf("cold boot: %w", err)
		}
		cb = append(cb, d)
	}
	res.ColdBoot = pct(cb, 50)
	if res.ColdBoot > 0 {
		res.CreateColdRatio = res.CreateP50 / res.ColdBoot
	}
	return res, nil
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// pct is the nearest-rank percentile.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// machine describes the host the benchmark client runs on.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				model = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		mem = fmt.Sprintf(", %d GiB", (kb+(1<<19))>>20)
	}
	return fmt.Sprintf("%d cores %s%s", runtime.NumCPU(), model, mem)
}

// benchProxy serves a small file from python's http.server in the sandbox
// and times GETs through the server's port proxy.
func benchProxy(ctx context.Context, c *sdk.Client, key string, sb *sdk.Sandbox) (float64, error) {
	if _, err := sb.StartBackground(ctx, "cd /tmp && echo ok > ok.txt && python3 -m http.server 8000 --bind 127.0.0.1", sdk.ExecOptions{}); err != nil {
		return 0, err
	}
	host := fmt.Sprintf("8000-%s.localhost", sb.ID)
	get := func() error {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.BaseURL()+"/ok.txt", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "ok\n" {
			return fmt.Errorf("GET through the proxy: %d %q", resp.StatusCode, b)
		}
		return nil
	}
	// On a loaded host the server can take half a minute to listen
	// (measured 28 s at load average 14): wait up to 90 s.
	deadline := time.Now().Add(90 * time.Second)
	for get() != nil {
		if time.Now().After(deadline) {
			return 0, get()
		}
		time.Sleep(100 * time.Millisecond)
	}
	var xs []float64
	for i := 0; i < 50; i++ {
		t0 := time.Now()
		if err := get(); err != nil {
			return 0, err
		}
		xs = append(xs, msOf(time.Since(t0)))
	}
	return pct(xs, 50), nil
}

// benchProxyRPS loads the sandbox's server (started by benchProxy) through
// the port proxy with wrk for a few seconds and returns requests per second.
func benchProxyRPS(ctx context.Context, c *sdk.Client, key string, sb *sdk.Sandbox) (float64, error) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return 0, fmt.Errorf("wrk not found (scripts/setup installs it): %w", err)
	}
	out, err := exec.CommandContext(ctx, wrk, "-t1", "-c4", "-d5s", "--timeout", "10s",
		"-H", "Host: "+sb.PortHost(8000), "-H", "Authorization: Bearer "+key, c.BaseURL()+"/ok.txt").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %v: %s", err, out)
	}
	return parseWrk(string(out))
}

// parseWrk reads "Requests/sec: N" from wrk's report, refusing a run with
// errors or non-2xx answers (their rate would not be the proxy's).
func parseWrk(out string) (float64, error) {
	if strings.Contains(out, "Non-2xx or 3xx responses") || strings.Contains(out, "Socket errors") {
		return 0, fmt.Errorf("wrk saw failed requests:\n%s", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Requests/sec:"); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no Requests/sec in wrk's output:\n%s", out)
}

// dirtyScript writes 200 MiB of fresh random bytes into memory and holds
// them, then says so. It writes a zeroed buffer a MiB at a time, so that 200
// MiB are dirtied, not more: bytearray(os.urandom(n)) would dirty 2n (the
// bytes object and its copy), as session 3's measurements did.
const dirtyScript = `python3 -c "
import os, time
b = bytearray(200 << 20)
for i in range(0, len(b), 1 << 20):
    b[i:i + (1 << 20)] = os.urandom(1 << 20)
open('/tmp/dirty.ready', 'w').close()
time.sleep(3600)
"`

// benchForkDirty measures forks of sb right after a process in it wrote
// 200 MiB of new memory (a fresh process each time, so the pages are dirty
// when the fork comes), until the child's agent answers.
func benchForkDirty(ctx context.Context, sb *sdk.Sandbox, n int) (float64, error) {
	var ms []float64
	for i := 0; i < n; i++ {
		if _, err := sb.Exec(ctx, "rm -f /tmp/dirty.ready", sdk.ExecOptions{}); err != nil {
			return 0, err
		}
		pid, err := sb.StartBackground(ctx, dirtyScript, sdk.ExecOptions{})
		if err != nil {
			return 0, err
		}
		r, err := sb.Exec(ctx, "for i in $(seq 600); do [ -e /tmp/dirty.ready ] && exit 0; sleep 0.1; done; exit 1", sdk.ExecOptions{TimeoutSeconds: 120})
		if err != nil {
			return 0, err
		}
		if r.ExitCode != 0 {
			return 0, fmt.Errorf("the 200 MiB writer did not get ready")
		}
		t0 := time.Now()
		kid, err := sb.Fork(ctx)
		if err != nil {
			return 0, err
		}
		ms = append(ms, msOf(time.Since(t0)))
		_ = kid.Kill(ctx)
		_ = sb.Signal(ctx, pid, "KILL")
	}
	return pct(ms, 50), nil
}

// runtimeStarts times n runs each of `python3 -c 0` and `node -e 0` in
// sb, taken in turn, and gives their p50s; a runtime the template lacks
// (exit 127) is 0.
func runtimeStarts(ctx context.Context, sb *sdk.Sandbox, n int) (python, node float64, err error) {
	cmds := []string{"python3 -c 0", "node -e 0"}
	times := make([][]float64, len(cmds))
	missing := make([]bool, len(cmds))
	for range n {
		for i, cmd := range cmds {
			if missing[i] {
				continue
			}
			t0 := time.Now()
			r, err := sb.Exec(ctx, cmd, sdk.ExecOptions{TimeoutSeconds: 120})
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", cmd, err)
			}
			switch r.ExitCode {
			case 0:
				times[i] = append(times[i], msOf(time.Since(t0)))
			case 127:
				missing[i] = true
			default:
				return 0, 0, fmt.Errorf("%s: exit %d: %s", cmd, r.ExitCode, r.Stderr)
			}
		}
	}
	return pct(times[0], 50), pct(times[1], 50), nil
}
