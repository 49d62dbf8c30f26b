package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// benchStandIn is a stand-in for the API `bench --functions` drives (the
// real figures need a server with VMs: pandastack bench --functions). Its
// invocations past the okInvokes-th answer 503 (0: none do). It counts the
// calls by kind.
func benchStandIn(t *testing.T, okInvokes int) (*sdk.Client, func() map[string]int) {
	var mu sync.Mutex
	calls := map[string]int{}
	fire := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		key := r.Method + " " + r.URL.Path
		if strings.HasSuffix(r.URL.Path, "/invoke") {
			key = "invoke"
		} else if r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/functions/") {
			key = "delete function"
		}
		calls[key]++
		n := calls[key]
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch key {
		case "GET /v1/health":
			w.Write([]byte(`{"status":"ok","accel":"tcg"}`))
		case "POST /v1/sandboxes":
			w.WriteHeader(201)
			w.Write([]byte(`{"id":"sbx_1","template":"base"}`))
		case "DELETE /v1/sandboxes/sbx_1":
			w.WriteHeader(204)
		case "POST /v1/functions":
			w.WriteHeader(201)
			w.Write([]byte(`{"name":"x","version":1}`))
		case "invoke":
			if okInvokes > 0 && n > okInvokes {
				w.WriteHeader(503)
				w.Write([]byte(`{"code":"unavailable","message":"the sandbox did not become ready"}`))
				return
			}
			w.Header().Set("X-PandaStack-Invocation-Id", "inv_1")
			w.Write([]byte(`{"hello":"bench"}`))
		case "POST /v1/schedules":
			w.WriteHeader(201)
			w.Write([]byte(`{"id":"cron_1"}`))
		case "GET /v1/schedules/cron_1/runs":
			var runs []map[string]any
			for i := range 3 {
				at := fire.Add(time.Duration(i) * time.Second)
				runs = append(runs, map[string]any{"fire_at": at, "started_at": at.Add(100 * time.Millisecond), "status": "succeeded"})
			}
			json.NewEncoder(w).Encode(map[string]any{"runs": runs})
		case "POST /v1/admin/bench/floor":
			var req map[string]any
			json.NewDecoder(r.Body).Decode(&req)
			if req["function"] == nil || req["template"] != nil || (req["parallel"] != float64(20) && req["answer"] != true && req["shim"] != true) {
				w.WriteHeader(400)
				w.Write([]byte(`{"code":"invalid","message":"want a function's floor with 20 at once"}`))
				return
			}
			if req["shim"] == true {
				w.Write([]byte(`{"function":"x","accel":"tcg","answer":true,"shim":true,"restore_p50_ms":45,"load_p50_ms":20,"load_ms":[18,20,25],"parallel_ms":700}`))
				return
			}
			if req["answer"] == true {
				w.Write([]byte(`{"function":"x","accel":"tcg","answer":true,"restore_p50_ms":60,"load_p50_ms":30,"parallel_ms":800}`))
				return
			}
			w.Write([]byte(`{"function":"x","accel":"tcg","restore_p50_ms":50,"restore_ms":[50],"parallel":20,"parallel_ms":1000,"parallel_p50_ms":400}`))
		case "delete function", "DELETE /v1/schedules/cron_1":
			w.WriteHeader(204)
		default:
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"not_found","message":"` + key + `"}}`))
		}
	}))
	t.Cleanup(srv.Close)
	c := sdk.NewClient(sdk.WithBaseURL(srv.URL), sdk.WithAPIKey("pds_test"))
	return c, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range calls {
			out[k] = v
		}
		return out
	}
}

// TestBenchFunctionsPlumbing runs `bench --functions`' measuring code
// against the stand-in: it measures the floor (plain creates), deploys,
// invokes, schedules and cleans up what it made, reports cron lateness
// from run times and each fresh p50's ratio to the floor, and the floors on
// the function's own snapshot (one restore, 20 at once) with their ratios.
func TestBenchFunctionsPlumbing(t *testing.T) {
	shortAlonePause(t)
	c, calls := benchStandIn(t, 0)
	res, err := benchFunctions(context.Background(), c, 4, 3, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if res.PythonFreshAloneP50 <= 0 || res.PythonFreshAloneP99 < res.PythonFreshAloneP50 || res.NodeFreshAloneP50 <= 0 {
		t.Fatalf("invocations alone: %+v", res)
	}
	if res.Invocations != 4 || res.PythonFreshP50 <= 0 || res.WarmP99 <= 0 || res.Parallel20Ms <= 0 || res.CronLatenessP50Ms != 100 || res.CronLatenessP99Ms != 100 ||
		res.CreateFloorP50 <= 0 || res.DeployNodeP99 <= 0 || res.InvokeFreshP50 != res.PythonFreshP50 || res.InvokeFreshFloorRatio != res.PythonFreshP50/res.CreateFloorP50 || res.Parallel20Failed != 0 {
		t.Fatalf("result: %+v", res)
	}
	if res.FnRestoreFloorP50 != 50 || res.FnParallel20Floor != 1000 || res.PythonFreshRestoreRat != res.PythonFreshP50/50 || res.Parallel20FloorRatio != res.Parallel20Ms/1000 {
		t.Fatalf("function floors: %+v", res)
	}
	// The answer floors: the prepared process's load until answered.
	if res.FnAnswerFloorP50 != 30 || res.FnNodeAnswerFloorP50 != 30 || res.FnParallel20AnswerFloor != 800 || res.PythonFreshAnswerRatio != res.PythonFreshP50/30 ||
		res.NodeFreshAnswerRatio != res.NodeFreshP50/30 || res.Parallel20AnswerFloorRate != res.Parallel20Ms/800 {
		t.Fatalf("function answer floors: %+v", res)
	}
	// The shim floors, one per runtime: the load until the shim answered.
	if res.FnPythonShimFloorP50 != 20 || res.FnNodeShimFloorP50 != 20 || res.FnNodeShimFloorP99 != 25 ||
		res.PythonAloneShimRatio != res.PythonFreshAloneP50/20 || res.NodeAloneShimRatio != res.NodeFreshAloneP50/20 ||
		res.FnParallel20ShimFloor != 700 || res.Parallel20ShimFloorRate != res.Parallel20Ms/700 {
		t.Fatalf("function shim floors: %+v", res)
	}
	// 4 plain creates (the floor), each killed; 3 deploys and 2×5 more; 4 python + 4
	// node, the same alone, 1 + 4 warm and 20 parallel invocations; all removed.
	n := calls()
	if n["POST /v1/functions"] != 3+2*benchRedeploys || n["invoke"] != 41 || n["delete function"] != 3 || n["DELETE /v1/schedules/cron_1"] != 1 ||
		n["POST /v1/sandboxes"] != 4 || n["DELETE /v1/sandboxes/sbx_1"] != 4 || n["POST /v1/admin/bench/floor"] != 5 {
		t.Fatalf("calls: %v", n)
	}
}

// Parallel invocations that fail are counted with the first error; the
// run's other figures are still reported (a loaded machine can starve a
// burst).
func TestBenchFunctionsCountsParallelFailures(t *testing.T) {
	shortAlonePause(t)
	c, _ := benchStandIn(t, 21) // the sequential ones succeed, the 20 at once fail
	res, err := benchFunctions(context.Background(), c, 4, 0, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if res.Parallel20Failed != 20 || !strings.Contains(res.Parallel20Error, "did not become ready") || res.PythonFreshP50 <= 0 || res.InvokeFreshFloorRatio <= 0 {
		t.Fatalf("result: %+v", res)
	}
}

// shortAlonePause makes the pause before an invocation measured alone
// short for the test.
func shortAlonePause(t *testing.T) {
	pause := benchAlonePause
	benchAlonePause = 10 * time.Millisecond
	t.Cleanup(func() { benchAlonePause = pause })
}
