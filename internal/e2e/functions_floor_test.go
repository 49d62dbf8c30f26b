package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestBenchFunctionFloor measures the floor a fresh invocation stands on
// over the admin route: bare restores of the caller's function's snapshot
// run and leave no VM behind; a function the caller does not have is 404,
// other keys are refused, and a template with a function is a bad request.
func TestBenchFunctionFloor(t *testing.T) {
	ctx := context.Background()
	admin := main.client(main.admin)
	t.Cleanup(func() { _ = admin.DeleteFunction(context.Background(), "floor-hello") })
	if _, err := admin.DeployFunction(ctx, sdk.FunctionConfig{Name: "floor-hello", Runtime: "python", Handler: "main.handler"},
		bundleOf(t, map[string]string{"main.py": "def handler(event, context):\n    return 1\n"})); err != nil {
		t.Fatalf("deploy: %v\n%s", err, main.tail())
	}
	f, err := admin.BenchFunctionFloor(ctx, "floor-hello", 1, 2)
	if err != nil {
		t.Fatalf("function floor: %v", err)
	}
	if f.RestoreP50Ms <= 0 || len(f.RestoreMs) != 1 || f.Parallel != 2 || f.ParallelMs < f.ParallelP50Ms || f.ParallelP50Ms <= 0 {
		t.Fatalf("function floor figures are not sane: %+v", f)
	}
	// The shim floor: a restore until the function's own shim answered a
	// ping on the direct port (the server checks the answer is its pong).
	if sf, err := admin.BenchFunctionShimFloor(ctx, "floor-hello", 2, 0); err != nil || len(sf.LoadMs) != 2 || sf.LoadP50Ms <= 0 || sf.LoadP50Ms > sf.RestoreP50Ms {
		t.Fatalf("function shim floor: %+v, %v", sf, err)
	}
	for _, d := range vmDirs(main.dataDir) {
		if strings.HasPrefix(d, "floor_") {
			t.Errorf("bare restore %s left behind", d)
		}
	}
	other := teamClient(t, "fnfloor-other")
	for _, tc := range []struct {
		name   string
		c      *sdk.Client
		fn     string
		status int
	}{
		{"a function the caller does not have is not found", admin, "no-such-function", http.StatusNotFound},
		{"a team key is refused", other, "floor-hello", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.BenchFunctionFloor(ctx, tc.fn, 1, 0)
			var ae *sdk.APIError
			if !errors.As(err, &ae) || ae.Status != tc.status {
				t.Fatalf("function floor: %v; want status %d", err, tc.status)
			}
		})
	}
	t.Run("a template and a function is a bad request", func(t *testing.T) {
		req, _ := http.NewRequest("POST", admin.BaseURL()+"/v1/admin/bench/floor", strings.NewReader(`{"template":"base","function":"floor-hello","sequential":1}`))
		req.Header.Set("Authorization", "Bearer "+main.admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want 400", resp.StatusCode)
		}
	})
}
