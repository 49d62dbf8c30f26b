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

// TestBenchFunctionsPlumbing runs `bench --functions`' measuring code
// against a stand-in for the API (the real figures need a server with
// VMs: pandastack bench --functions): it deploys, invokes, schedules and
// cleans up what it made, and reports cron lateness from run times.
func TestBenchFunctionsPlumbing(t *testing.T) {
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
		case "delete function", "DELETE /v1/schedules/cron_1":
			w.WriteHeader(204)
		default:
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"not_found","message":"` + key + `"}}`))
		}
	}))
	defer srv.Close()
	c := sdk.NewClient(sdk.WithBaseURL(srv.URL), sdk.WithAPIKey("pds_test"))
	res, err := benchFunctions(context.Background(), c, 4, 3, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	if res.Invocations != 4 || res.PythonFreshP50 <= 0 || res.WarmP99 <= 0 || res.Parallel20Ms <= 0 || res.CronLatenessP50Ms != 100 || res.CronLatenessP99Ms != 100 ||
		res.CreateFloorP50 <= 0 || res.InvokeFreshP50 != res.PythonFreshP50 || res.InvokeFreshFloorRatio != res.PythonFreshP50/res.CreateFloorP50 {
		t.Fatalf("result: %+v", res)
	}
	// 4 plain creates (the floor), each killed; 3 deploys; 4 python + 4 node + 1 + 4 warm + 20 parallel invocations; all removed.
	if calls["POST /v1/functions"] != 3 || calls["invoke"] != 33 || calls["delete function"] != 3 || calls["DELETE /v1/schedules/cron_1"] != 1 ||
		calls["POST /v1/sandboxes"] != 4 || calls["DELETE /v1/sandboxes/sbx_1"] != 4 {
		t.Fatalf("calls: %v", calls)
	}
}
