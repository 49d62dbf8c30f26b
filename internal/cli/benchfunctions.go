package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// functionsBenchResult is what `pandastack bench --functions --json`
// prints: the function product's figures, client measured.
type functionsBenchResult struct {
	Accel       string `json:"accel"`
	Machine     string `json:"machine"`
	Date        string `json:"date"`
	Invocations int    `json:"invocations"`
	// Deploy until invocable: the deploy call answers once the version
	// serves (bundle unpacked, runtime started, handler loaded, snapshot).
	// The first deploy of each runtime (it may bake the runtime's base,
	// once per server and template build).
	DeployPythonMs float64 `json:"fn_deploy_python_ms"`
	DeployNodeMs   float64 `json:"fn_deploy_node_ms"`
	// benchRedeploys more deploys of each, one after another.
	DeployPythonP50 float64 `json:"fn_deploy_python_p50_ms"`
	DeployPythonP99 float64 `json:"fn_deploy_python_p99_ms"`
	DeployNodeP50   float64 `json:"fn_deploy_node_p50_ms"`
	DeployNodeP99   float64 `json:"fn_deploy_node_p99_ms"`
	// Fresh invocations of hello-world handlers, one after another.
	PythonFreshP50 float64 `json:"fn_python_fresh_p50_ms"`
	PythonFreshP99 float64 `json:"fn_python_fresh_p99_ms"`
	NodeFreshP50   float64 `json:"fn_node_fresh_p50_ms"`
	NodeFreshP99   float64 `json:"fn_node_fresh_p99_ms"`
	// The same, each invocation alone: started benchAlonePause after the
	// one before answered, once its VM's teardown and the pool's refill
	// behind it are done. One after another, each overlaps that work of
	// the one before (on 2 cores under TCG it shares the CPU with it):
	// those figures are a steady load's, these one invocation's.
	PythonFreshAloneP50 float64 `json:"fn_python_fresh_alone_p50_ms"`
	PythonFreshAloneP99 float64 `json:"fn_python_fresh_alone_p99_ms"`
	NodeFreshAloneP50   float64 `json:"fn_node_fresh_alone_p50_ms"`
	NodeFreshAloneP99   float64 `json:"fn_node_fresh_alone_p99_ms"`
	// The floor a fresh invocation stands on, measured in the same run: a
	// plain sandbox create from the base template the functions are baked
	// from (POST /v1/sandboxes until its guest agent answered), killed
	// after each. InvokeFreshP50 is the Python hello's fresh p50 again,
	// and InvokeFreshFloorRatio it ÷ the create p50: ratios in one run
	// survive the drift of a shared machine, figures across runs do not.
	CreateFloorP50        float64 `json:"create_floor_p50_ms"`
	CreateFloorP99        float64 `json:"create_floor_p99_ms"`
	InvokeFreshP50        float64 `json:"invoke_fresh_p50_ms"`
	InvokeFreshFloorRatio float64 `json:"invoke_fresh_floor_ratio"`
	NodeFreshFloorRatio   float64 `json:"fn_node_fresh_floor_ratio"`
	// The floors on the function's own snapshot, measured on the server's
	// host in the same run (admin key; 0 when not measured): a bare QEMU
	// restore of the Python hello's snapshot (no network, no agent
	// handshake) p50, and 20 of them started at once until the last runs.
	// The ratios are the fresh p50 and the burst over them.
	FnRestoreFloorP50     float64 `json:"fn_restore_floor_ms"`
	FnParallel20Floor     float64 `json:"fn_parallel20_floor_ms"`
	PythonFreshRestoreRat float64 `json:"fn_python_fresh_restore_floor_ratio"`
	Parallel20FloorRatio  float64 `json:"fn_parallel20_floor_ratio"`
	// The same restores timed until the guest's agent answered a hello:
	// from the moment a prepared process was handed the snapshot (what an
	// invocation's restore is), p50; and 20 at once until the last
	// answered (the Python hello's snapshot; the Node hello's one by one
	// too). A fresh invocation needs at least that one answer from its
	// guest; the ratios say what the call itself adds.
	FnAnswerFloorP50          float64 `json:"fn_answer_floor_ms"`
	FnNodeAnswerFloorP50      float64 `json:"fn_node_answer_floor_ms"`
	FnParallel20AnswerFloor   float64 `json:"fn_parallel20_answer_floor_ms"`
	PythonFreshAnswerRatio    float64 `json:"fn_python_fresh_answer_floor_ratio"`
	PythonAloneAnswerRatio    float64 `json:"fn_python_fresh_alone_answer_floor_ratio"`
	NodeFreshAnswerRatio      float64 `json:"fn_node_fresh_answer_floor_ratio"`
	Parallel20AnswerFloorRate float64 `json:"fn_parallel20_answer_floor_ratio"`
	// The same restores timed until the function's shim answered a ping
	// on the direct port (no agent greeted), p50 and p99 of 10, from the
	// prepared process's load: the least any fresh invocation of each
	// runtime needs (the VM restored, the runtime woken by a line and
	// answering one). The ratios are each runtime's fresh p50 alone over
	// its own: what the invocation's own work (the hello's part, the
	// call, the handler) adds.
	FnPythonShimFloorP50 float64 `json:"fn_python_shim_floor_ms"`
	FnPythonShimFloorP99 float64 `json:"fn_python_shim_floor_p99_ms"`
	FnNodeShimFloorP50   float64 `json:"fn_node_shim_floor_ms"`
	FnNodeShimFloorP99   float64 `json:"fn_node_shim_floor_p99_ms"`
	PythonAloneShimRatio float64 `json:"fn_python_fresh_alone_shim_floor_ratio"`
	NodeAloneShimRatio   float64 `json:"fn_node_fresh_alone_shim_floor_ratio"`
	// FnParallel20ShimFloor is 20 of the Python hello's at once, until the
	// last shim answered: the floor under 20 fresh invocations at once
	// (Parallel20ShimFloorRate the burst over it).
	FnParallel20ShimFloor   float64 `json:"fn_parallel20_shim_floor_ms"`
	Parallel20ShimFloorRate float64 `json:"fn_parallel20_shim_floor_ratio"`
	// Warm invocations (isolation warm, after a first call).
	WarmP50 float64 `json:"fn_warm_p50_ms"`
	WarmP99 float64 `json:"fn_warm_p99_ms"`
	// 20 fresh invocations at once: until the last answered.
	Parallel20Ms float64 `json:"fn_parallel20_ms"`
	// How many of the 20 failed, and the first one's error.
	Parallel20Failed int    `json:"fn_parallel20_failed"`
	Parallel20Error  string `json:"fn_parallel20_error,omitempty"`
	// A per-second schedule: how late runs started after their fire time.
	CronRuns          int     `json:"cron_runs"`
	CronLatenessP50Ms float64 `json:"cron_lateness_p50_ms"`
	CronLatenessP99Ms float64 `json:"cron_lateness_p99_ms"`
}

// benchRedeploys is how many times each hello function is deployed again
// for the deploy p50/p99.
const benchRedeploys = 5

// benchAlonePause is the pause before each invocation measured alone
// (a variable for tests).
var benchAlonePause = time.Second

const (
	benchPyHandler   = "def handler(event, context):\n    return {'hello': event.get('name')}\n"
	benchNodeHandler = "export async function handler(event) {\n  return { hello: event.name };\n}\n"
)

// benchFunctions deploys hello-world functions (removed at the end) and
// measures them: n sequential invocations each, 20 at once, and cronRuns
// runs of a per-second schedule.
func benchFunctions(ctx context.Context, c *sdk.Client, n, cronRuns int, progress func(string, ...any)) (*functionsBenchResult, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	res := &functionsBenchResult{Accel: h.Accel, Machine: machine(), Date: time.Now().UTC().Format("2006-01-02"), Invocations: n, CronRuns: cronRuns}
	tag := fmt.Sprintf("%d", time.Now().UnixNano()%1e6)
	names := map[string]string{"python": "bench-py-" + tag, "node": "bench-node-" + tag, "warm": "bench-warm-" + tag}
	defer func() {
		for _, name := range names {
			_ = c.DeleteFunction(context.WithoutCancel(ctx), name)
		}
	}()
	deploy := func(key, runtime, handler, file, code, isolation string) (float64, error) {
		bundle, err := tarGz(map[string]string{file: code})
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		_, err = c.DeployFunction(ctx, sdk.FunctionConfig{Name: names[key], Runtime: runtime, Handler: handler, Isolation: isolation, MaxConcurrency: 20}, bundle)
		return ms(time.Since(t0)), err
	}
	invoke := func(name string) (float64, error) {
		t0 := time.Now()
		r, err := c.InvokeFunction(ctx, name, json.RawMessage(`{"name":"bench"}`))
		if err == nil && r.FunctionError != "" {
			err = fmt.Errorf("invocation %s raised %s: %s", r.InvocationID, r.FunctionError, r.Error.Message)
		}
		return ms(time.Since(t0)), err
	}
	series := func(name string, n int, pause time.Duration) (p50, p99 float64, err error) {
		var xs []float64
		for range n {
			time.Sleep(pause)
			d, err := invoke(name)
			if err != nil {
				return 0, 0, err
			}
			xs = append(xs, d)
		}
		return pct(xs, 50), pct(xs, 99), nil
	}
	progress("deploying python, node and warm python hello functions")
	if res.DeployPythonMs, err = deploy("python", "python", "main.handler", "main.py", benchPyHandler, ""); err != nil {
		return nil, fmt.Errorf("deploy python: %w", err)
	}
	if res.DeployNodeMs, err = deploy("node", "node", "index.handler", "index.mjs", benchNodeHandler, ""); err != nil {
		return nil, fmt.Errorf("deploy node: %w", err)
	}
	if _, err = deploy("warm", "python", "main.handler", "main.py", benchPyHandler, "warm"); err != nil {
		return nil, fmt.Errorf("deploy warm python: %w", err)
	}
	progress("%d more deploys of each", benchRedeploys)
	var pys, nodes []float64
	for range benchRedeploys {
		d, err := deploy("python", "python", "main.handler", "main.py", benchPyHandler, "")
		if err != nil {
			return nil, fmt.Errorf("redeploy python: %w", err)
		}
		pys = append(pys, d)
		if d, err = deploy("node", "node", "index.handler", "index.mjs", benchNodeHandler, ""); err != nil {
			return nil, fmt.Errorf("redeploy node: %w", err)
		}
		nodes = append(nodes, d)
	}
	res.DeployPythonP50, res.DeployPythonP99 = pct(pys, 50), pct(pys, 99)
	res.DeployNodeP50, res.DeployNodeP99 = pct(nodes, 50), pct(nodes, 99)
	progress("%d plain sandbox creates from the base template (the floor)", n)
	if res.CreateFloorP50, res.CreateFloorP99, err = createFloor(ctx, c, n); err != nil {
		return nil, fmt.Errorf("create floor: %w", err)
	}
	progress("%d fresh invocations each (python, node), then warm", n)
	if res.PythonFreshP50, res.PythonFreshP99, err = series(names["python"], n, 0); err != nil {
		return nil, err
	}
	if res.NodeFreshP50, res.NodeFreshP99, err = series(names["node"], n, 0); err != nil {
		return nil, err
	}
	progress("%d fresh invocations each alone (%s after the one before)", n, benchAlonePause)
	if res.PythonFreshAloneP50, res.PythonFreshAloneP99, err = series(names["python"], n, benchAlonePause); err != nil {
		return nil, err
	}
	if res.NodeFreshAloneP50, res.NodeFreshAloneP99, err = series(names["node"], n, benchAlonePause); err != nil {
		return nil, err
	}
	res.InvokeFreshP50 = res.PythonFreshP50
	res.InvokeFreshFloorRatio = ratio(res.PythonFreshP50, res.CreateFloorP50)
	res.NodeFreshFloorRatio = ratio(res.NodeFreshP50, res.CreateFloorP50)
	if _, err := invoke(names["warm"]); err != nil { // the first call starts the warm VM
		return nil, err
	}
	if res.WarmP50, res.WarmP99, err = series(names["warm"], n, 0); err != nil {
		return nil, err
	}
	progress("bare restores of the python function's snapshot, 5 one by one and 20 at once (the floors)")
	if f, err := c.BenchFunctionFloor(ctx, names["python"], 5, 20); err != nil {
		progress("no function floor (it needs an admin key and a server that measures on its host): %v", err)
	} else {
		res.FnRestoreFloorP50, res.FnParallel20Floor = f.RestoreP50Ms, f.ParallelMs
		res.PythonFreshRestoreRat = ratio(res.PythonFreshP50, res.FnRestoreFloorP50)
	}
	if f, err := c.BenchFunctionAnswerFloor(ctx, names["python"], 5, 20); err != nil {
		progress("no function answer floor: %v", err)
	} else {
		res.FnAnswerFloorP50, res.FnParallel20AnswerFloor = f.LoadP50Ms, f.ParallelMs
		res.PythonFreshAnswerRatio = ratio(res.PythonFreshP50, res.FnAnswerFloorP50)
		res.PythonAloneAnswerRatio = ratio(res.PythonFreshAloneP50, res.FnAnswerFloorP50)
	}
	if f, err := c.BenchFunctionAnswerFloor(ctx, names["node"], 5, 0); err == nil {
		res.FnNodeAnswerFloorP50 = f.LoadP50Ms
		res.NodeFreshAnswerRatio = ratio(res.NodeFreshP50, res.FnNodeAnswerFloorP50)
	}
	progress("bare restores of each function's snapshot until its shim answers, 10 each and 20 of python's at once (the shim floors)")
	if f, err := c.BenchFunctionShimFloor(ctx, names["python"], 10, 20); err != nil {
		progress("no python shim floor: %v", err)
	} else {
		res.FnPythonShimFloorP50, res.FnPythonShimFloorP99 = f.LoadP50Ms, pct(f.LoadMs, 99)
		res.FnParallel20ShimFloor = f.ParallelMs
		res.PythonAloneShimRatio = ratio(res.PythonFreshAloneP50, res.FnPythonShimFloorP50)
	}
	if f, err := c.BenchFunctionShimFloor(ctx, names["node"], 10, 0); err != nil {
		progress("no node shim floor: %v", err)
	} else {
		res.FnNodeShimFloorP50, res.FnNodeShimFloorP99 = f.LoadP50Ms, pct(f.LoadMs, 99)
		res.NodeAloneShimRatio = ratio(res.NodeFreshAloneP50, res.FnNodeShimFloorP50)
	}
	progress("20 fresh invocations at once")
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := invoke(names["python"]); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	res.Parallel20Ms = ms(time.Since(t0))
	res.Parallel20FloorRatio = ratio(res.Parallel20Ms, res.FnParallel20Floor)
	res.Parallel20AnswerFloorRate = ratio(res.Parallel20Ms, res.FnParallel20AnswerFloor)
	res.Parallel20ShimFloorRate = ratio(res.Parallel20Ms, res.FnParallel20ShimFloor)
	close(errs)
	// Failures are counted, not fatal: on a loaded shared machine a burst
	// can starve a VM past its ready timeout, and the run's other figures
	// still stand.
	for err := range errs {
		if res.Parallel20Failed++; res.Parallel20Error == "" {
			res.Parallel20Error = err.Error()
		}
	}
	if res.Parallel20Failed > 0 {
		progress("%d of the 20 parallel invocations failed: %s", res.Parallel20Failed, res.Parallel20Error)
	}
	if cronRuns > 0 {
		progress("%d runs of a per-second schedule", cronRuns)
		if res.CronLatenessP50Ms, res.CronLatenessP99Ms, err = cronLateness(ctx, c, names["python"], cronRuns); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// createFloor measures n plain sandbox creates from the base template
// (the functions' default), one after another, each killed before the
// next as a fresh invocation's VM is: p50 and p99 in ms.
func createFloor(ctx context.Context, c *sdk.Client, n int) (p50, p99 float64, err error) {
	var xs []float64
	for range n {
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "base", TTLSeconds: 600, Metadata: map[string]string{"bench": "1"}})
		d := time.Since(t0)
		if err != nil {
			return 0, 0, err
		}
		xs = append(xs, ms(d))
		if err := sb.Kill(ctx); err != nil {
			return 0, 0, err
		}
	}
	return pct(xs, 50), pct(xs, 99), nil
}

// cronLateness schedules function every second (overlap allow) until
// runs have started, then reports how late they started.
func cronLateness(ctx context.Context, c *sdk.Client, function string, runs int) (p50, p99 float64, err error) {
	sc, err := c.CreateSchedule(ctx, sdk.ScheduleParams{Function: function, Schedule: "* * * * * *", Overlap: "allow"})
	if err != nil {
		return 0, 0, err
	}
	defer c.DeleteSchedule(context.WithoutCancel(ctx), sc.ID)
	deadline := time.Now().Add(time.Duration(runs)*time.Second + 2*time.Minute)
	for {
		rs, err := c.ScheduleRuns(ctx, sc.ID)
		if err != nil {
			return 0, 0, err
		}
		var late []float64
		for _, r := range rs {
			if r.StartedAt != nil {
				late = append(late, ms(r.StartedAt.Sub(r.FireAt)))
			}
		}
		if len(late) >= runs {
			return pct(late, 50), pct(late, 99), nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("cron: %d of %d runs started in time", len(late), runs)
		}
		time.Sleep(time.Second)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// tarGz packs files (name: content) as a tar.gz bundle.
func tarGz(files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
