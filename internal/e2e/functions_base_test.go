package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A Node handler that shows what its VM holds: its env, its directory and
// the code beside it.
const nodeShow = `import fs from "node:fs";
import { randomBytes } from "node:crypto";
export async function handler(event) {
  return { secret: process.env.SECRET ?? null, cwd: process.cwd(), files: fs.readdirSync("/var/task").sort(), mark: MARK,
    rand: Math.random() + " " + randomBytes(8).toString("hex") + " " + crypto.randomUUID() };
}
const MARK = "%s";
`

const pyShow = `import os

def handler(event, context):
    files = sorted(f for f in os.listdir("/var/task") if f != "__pycache__")  # Python's own, from the import
    return {"secret": os.environ.get("SECRET"), "cwd": os.getcwd(), "files": files, "n": event["n"]}
`

// Functions on runtime bases: deploys of two teams restore one
// platform-owned base per runtime (the runtime started, waiting for a
// handler) and each loads its own code and env into it; neither team sees
// the other's code or env, nor the base itself; a handler that fails to
// import fails its deploy with the runtime's error; and a burst of fresh
// invocations all answer. On the suite's shared server.
func TestFunctionsRuntimeBase(t *testing.T) {
	ctx := context.Background()
	a, b := teamClient(t, "fnbase-a"), teamClient(t, "fnbase-b")
	t.Cleanup(func() {
		for _, c := range []*sdk.Client{a, b} {
			for _, n := range []string{"show-node", "show-py", "burst"} {
				_ = c.DeleteFunction(context.Background(), n)
			}
		}
	})
	invoke := func(t *testing.T, c *sdk.Client, name, event string) map[string]any {
		t.Helper()
		r, err := c.InvokeFunction(ctx, name, json.RawMessage(event))
		if err != nil {
			t.Fatalf("invoke %s: %v", name, err)
		}
		return decodeResult(t, r)
	}

	t.Run("two teams deploy on one base and see only their own code and env", func(t *testing.T) {
		for _, tc := range []struct {
			c      *sdk.Client
			secret string
			files  map[string]string
		}{
			{a, "alpha", map[string]string{"index.mjs": fmt.Sprintf(nodeShow, "a"), "only-a.txt": "a"}},
			{b, "beta", map[string]string{"index.mjs": fmt.Sprintf(nodeShow, "b"), "only-b.txt": "b"}},
		} {
			if _, err := tc.c.DeployFunction(ctx, sdk.FunctionConfig{Name: "show-node", Runtime: "node", Handler: "index.handler",
				Env: map[string]string{"SECRET": tc.secret}}, bundleOf(t, tc.files)); err != nil {
				t.Fatalf("deploy: %v\n%s", err, main.tail())
			}
		}
		// Math.random, crypto.randomBytes and crypto.randomUUID in fresh
		// invocations of functions on one base: no value seen twice.
		var rands []any
		defer func() {
			seen := map[string]bool{}
			for _, r := range rands {
				s, _ := r.(string)
				for _, v := range strings.Fields(s) {
					if seen[v] {
						t.Errorf("random values of fresh invocations on one base repeat: %v", rands)
						return
					}
					seen[v] = true
				}
				if len(strings.Fields(s)) != 3 {
					t.Errorf("random values %q: want three", s)
				}
			}
		}()
		for _, tc := range []struct {
			c            *sdk.Client
			secret, mark string
			files        []any
		}{
			{a, "alpha", "a", []any{"index.mjs", "only-a.txt"}},
			{b, "beta", "b", []any{"index.mjs", "only-b.txt"}},
		} {
			m := invoke(t, tc.c, "show-node", `{}`)
			rands = append(rands, m["rand"], invoke(t, tc.c, "show-node", `{}`)["rand"])
			files, _ := m["files"].([]any)
			if m["secret"] != tc.secret || m["mark"] != tc.mark || m["cwd"] != "/var/task" || !slices.Equal(files, tc.files) {
				t.Fatalf("team %s's function answered %v; want secret=%s, mark=%s, cwd=/var/task, files=%v", tc.mark, m, tc.secret, tc.mark, tc.files)
			}
		}
		if _, err := b.DeployFunction(ctx, sdk.FunctionConfig{Name: "show-py", Runtime: "python", Handler: "main.handler"},
			bundleOf(t, map[string]string{"main.py": pyShow})); err != nil {
			t.Fatalf("deploy python: %v", err)
		}
		if m := invoke(t, b, "show-py", `{"n":1}`); m["secret"] != nil || m["cwd"] != "/var/task" || fmt.Sprint(m["files"]) != "[main.py]" {
			t.Fatalf("python function answered %v; want no SECRET, cwd=/var/task, files=[main.py]", m)
		}
	})

	t.Run("the base is baked once per runtime and no team can use it", func(t *testing.T) {
		log, err := os.ReadFile(main.log)
		if err != nil {
			t.Fatal(err)
		}
		bases := map[string][]string{}
		for _, m := range regexp.MustCompile(`runtime base baked".*? runtime=(\w+) .*?snapshot=(snap_\w+)`).FindAllStringSubmatch(string(log), -1) {
			bases[m[1]] = append(bases[m[1]], m[2])
		}
		if len(bases["node"]) != 1 || len(bases["python"]) != 1 {
			t.Fatalf("runtime bases baked: %v; want one node and one python base for every deploy of both teams", bases)
		}
		for _, c := range []*sdk.Client{a, b} {
			list, err := c.ListSnapshots(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, sn := range list {
				if sn.ID == bases["node"][0] || strings.HasPrefix(sn.Name, "fn-base-") {
					t.Fatalf("a team lists the runtime base: %+v", sn)
				}
			}
			_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: bases["node"][0]})
			if !sdk.IsNotFound(err) {
				t.Fatalf("a team's create from the runtime base: %v, want 404", err)
			}
			if err := c.DeleteSnapshot(ctx, bases["node"][0]); !sdk.IsNotFound(err) {
				t.Fatalf("a team's delete of the runtime base: %v, want 404", err)
			}
		}
	})

	t.Run("a handler that fails to import fails its deploy with the runtime's error", func(t *testing.T) {
		for _, tc := range []struct {
			runtime, handler, file, code, want string
		}{
			{"node", "index.handler", "index.mjs", "throw new Error('nope at import');\nexport function handler() {}\n", "nope at import"},
			{"node", "index.handler", "index.mjs", "export const handler = 1;\n", "exports no function handler"},
			{"python", "main.handler", "main.py", "import no_such_module\n\ndef handler(event, context):\n    return 1\n", "ModuleNotFoundError"},
		} {
			_, err := a.DeployFunction(ctx, sdk.FunctionConfig{Name: "broken", Runtime: tc.runtime, Handler: tc.handler},
				bundleOf(t, map[string]string{tc.file: tc.code}))
			if !sdk.IsInvalid(err) || !strings.Contains(err.Error(), "failed to load") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s deploy of %q: %v, want 400 saying it failed to load with %q", tc.runtime, tc.code, err, tc.want)
			}
		}
		if _, err := a.GetFunction(ctx, "broken"); !sdk.IsNotFound(err) {
			t.Fatalf("a failed deploy left a function: %v", err)
		}
	})

	t.Run("a burst of fresh invocations all answer", func(t *testing.T) {
		if _, err := a.DeployFunction(ctx, sdk.FunctionConfig{Name: "burst", Runtime: "python", Handler: "main.handler"},
			bundleOf(t, map[string]string{"main.py": pyShow})); err != nil {
			t.Fatalf("deploy: %v", err)
		}
		const n = 10
		var wg sync.WaitGroup
		errs := make([]error, n)
		ids := make([]string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := a.InvokeFunction(ctx, "burst", json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
				if err != nil {
					errs[i] = err
					return
				}
				var m map[string]any
				if err := json.Unmarshal(r.Body, &m); err != nil || r.FunctionError != "" || m["n"] != float64(i) {
					errs[i] = fmt.Errorf("answered %s (function error %q, %v)", r.Body, r.FunctionError, err)
				}
				ids[i] = r.InvocationID
			}()
		}
		wg.Wait()
		failed := 0
		for i, err := range errs {
			if err != nil {
				failed++
				t.Errorf("invocation %d of the burst: %v", i, err)
			}
		}
		if failed > 0 {
			t.Fatalf("%d of %d invocations failed\n%s", failed, n, main.tail())
		}
		slices.Sort(ids)
		if len(slices.Compact(ids)) != n {
			t.Fatalf("invocation ids not distinct: %v", ids)
		}
	})
}
