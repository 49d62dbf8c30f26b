package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// bundleOf packs files (name: content) as a tar.gz bundle.
func bundleOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const pyHello = `import os, random, ssl, subprocess, time

count = 0  # module state: a fresh VM per invocation keeps it at 1
tls = ssl.create_default_context()  # OpenSSL's generators, in use before the snapshot
ssl.RAND_bytes(1)


def handler(event, context):
    global count
    count += 1
    if context.trigger == "http":
        return {"status_code": 201, "headers": {"X-Hello": event["query"].get("who", "")},
                "body": " ".join([event["method"], event["path"], event["body"], str(count)])}
    if event.get("raise"):
        raise ValueError("boom: " + event["raise"])
    if event.get("sleep"):
        subprocess.Popen(["sleep", "300"])  # a child the timeout must end too
        time.sleep(event["sleep"])
    print("hello from the log")
    return {"hello": event.get("name"), "count": count, "invocation": context.invocation_id,
            "greeting": os.environ.get("GREETING"), "execution": context.execution_id,
            "now": time.time(), "rand": os.urandom(16).hex(), "random": random.random(), "openssl": ssl.RAND_bytes(16).hex(),
            "generation": open("/run/pandastack/generation").read().strip()}
`

const nodeESM = `import crypto from "node:crypto";
import fs from "node:fs";
import { promisify } from "node:util";
let count = 0;
export async function handler(event, context) {
  count += 1;
  console.log("node log line");
  const key = crypto.generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "der" }).toString("hex");
  // and one made in libuv's thread pool: that thread's own generator
  const pair = await promisify(crypto.generateKeyPair)("ed25519");
  const asyncKey = pair.publicKey.export({ type: "spki", format: "der" }).toString("hex");
  const rand = Buffer.alloc(16); // the kernel's RNG itself, not the shim's redirect of crypto
  const fd = fs.openSync("/dev/urandom", "r");
  fs.readSync(fd, rand);
  fs.closeSync(fd);
  return { hello: event.name, count, invocation: context.invocationId, style: "esm", now: Date.now(), key, asyncKey,
           rand: rand.toString("hex"), generation: fs.readFileSync("/run/pandastack/generation", "utf8").trim() };
}
`

const nodeCJS = `let count = 0;
exports.handler = async (event, context) => {
  count += 1;
  const ecdh = require("node:crypto").createECDH("prime256v1");
  return { hello: event.name, count, style: "cjs", now: Date.now(), key: ecdh.generateKeys("hex") };
};
`

// invoke posts body to a function's invoke route as it is.
func invokeRaw(t *testing.T, c *sdk.Client, key, name, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", c.BaseURL()+"/v1/functions/"+name+"/invoke", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func decodeResult(t *testing.T, r *sdk.InvokeResult) map[string]any {
	t.Helper()
	if r.FunctionError != "" {
		t.Fatalf("invocation %s raised %s: %+v", r.InvocationID, r.FunctionError, r.Error)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("invocation %s answered %q: %v", r.InvocationID, r.Body, err)
	}
	return m
}

// bigEvent invokes name (a handler that answers {"hello": event.name})
// with an event of ~2 MiB: it reaches the handler whole, in the many
// reads its VM's port takes, and so does the answer.
func bigEvent(t *testing.T, c *sdk.Client, name string) {
	t.Helper()
	big := strings.Repeat("panda ", 350_000) + "end"
	event, _ := json.Marshal(map[string]string{"name": big})
	r, err := c.InvokeFunction(context.Background(), name, event)
	if err != nil {
		t.Fatalf("invoke %s with a %d-byte event: %v", name, len(event), err)
	}
	if m := decodeResult(t, r); m["hello"] != big {
		got, _ := m["hello"].(string)
		t.Fatalf("%s answered a %d-byte name for the %d bytes sent", name, len(got), len(big))
	}
}

// Functions: deploy a Python and a Node handler (ES module and CommonJS)
// into baked snapshots and invoke them, each call in a fresh microVM; a
// raise, a timeout, bad bundles and bad bodies answer as documented; a
// per-second cron schedule fires with distinct execution ids and keeps its
// history. All on the suite's shared server.
func TestFunctions(t *testing.T) {
	ctx := context.Background()
	k, err := main.client(main.admin).CreateKey(ctx, "fn-team", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := main.client(k.Key)
	other := teamClient(t, "fn-other")
	t.Cleanup(func() {
		for _, n := range []string{"py-hello", "node-esm", "node-cjs"} {
			_ = c.DeleteFunction(context.Background(), n)
		}
	})

	t.Run("python deploy and fresh invocations", func(t *testing.T) {
		f, err := c.DeployFunction(ctx, sdk.FunctionConfig{Name: "py-hello", Runtime: "python", Handler: "main.handler",
			Env: map[string]string{"GREETING": "hi"}, TimeoutSeconds: 4},
			bundleOf(t, map[string]string{"main.py": pyHello}))
		if err != nil {
			t.Fatalf("deploy: %v\n%s", err, main.tail())
		}
		if f.Version != 1 || f.Latest.Runtime != "python" || len(f.Latest.EnvKeys) != 1 || f.Latest.EnvKeys[0] != "GREETING" {
			t.Fatalf("deployed function: %+v", f)
		}
		// The snapshot's clock is the deploy's: a handler that ran before
		// its VM's clock was stepped would see a time 3 s old.
		time.Sleep(3 * time.Second)
		ids, rands, gens := map[string]bool{}, map[string]bool{}, map[string]bool{}
		for i := 0; i < 2; i++ {
			sent := time.Now()
			r, err := c.InvokeFunction(ctx, "py-hello", json.RawMessage(`{"name":"panda"}`))
			if err != nil {
				t.Fatalf("invoke: %v", err)
			}
			m := decodeResult(t, r)
			if m["hello"] != "panda" || m["count"] != float64(1) || m["greeting"] != "hi" || m["invocation"] != r.InvocationID {
				t.Fatalf("invocation %d answered %v (header id %s); want hello=panda, count=1 (fresh VM), greeting=hi", i, m, r.InvocationID)
			}
			now, _ := m["now"].(float64)
			if at := time.UnixMilli(int64(now * 1000)); at.Before(sent.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
				t.Fatalf("invocation %d: the handler's clock read %s, sent at %s: want the host's time", i, at.Format(time.RFC3339Nano), sent.Format(time.RFC3339Nano))
			}
			// Every VM restored from the snapshot starts with its
			// kernel RNG and the random module's state: each fresh
			// invocation's must be its own (functions/hello.go).
			// Each source on its own: the kernel's, the random module's
			// and OpenSSL's (in use before the snapshot; shim.py, reseed).
			for _, k := range []string{"rand", "random", "openssl"} {
				v := fmt.Sprint(m[k])
				if m[k] == nil || rands[k+v] {
					t.Fatalf("invocation %d: %s value %q repeats an earlier fresh invocation's (or is missing): %v", i, k, v, rands)
				}
				rands[k+v] = true
			}
			// ... and the generation token processes watch to reseed.
			gen, _ := m["generation"].(string)
			if len(gen) != 32 || gens[gen] {
				t.Fatalf("invocation %d: generation token %q is not a new one: %v", i, gen, gens)
			}
			gens[gen] = true
			ids[r.InvocationID] = true
			inv, err := c.GetInvocation(ctx, "py-hello", r.InvocationID)
			if err != nil || inv.Status != "succeeded" || !strings.Contains(inv.Logs, "hello from the log") {
				t.Fatalf("invocation record: %+v, %v", inv, err)
			}
		}
		if len(ids) != 2 {
			t.Fatalf("invocation ids not distinct: %v", ids)
		}
		// Each invocation's VM ends right after it answered (the kill is
		// off the answer's path).
		eventually(t, 30*time.Second, "the invocations' VMs to end", func() bool {
			sbs, err := c.ListSandboxes(ctx, sdk.ListParams{})
			if err != nil {
				return false
			}
			for _, sb := range sbs {
				if sb.Metadata["pandastack.function"] != "" {
					return false
				}
			}
			return true
		})
	})

	t.Run("a large event and its answer pass whole", func(t *testing.T) {
		bigEvent(t, c, "py-hello")
	})

	t.Run("a handler that raises answers 200 with the function error", func(t *testing.T) {
		r, err := c.InvokeFunction(ctx, "py-hello", json.RawMessage(`{"raise":"bad input"}`))
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		if r.FunctionError != "Unhandled" || r.Error.Type != "ValueError" || r.Error.Message != "boom: bad input" || !strings.Contains(r.Error.Stack, "main.py") {
			t.Fatalf("function error %q: %+v", r.FunctionError, r.Error)
		}
		inv, err := c.GetInvocation(ctx, "py-hello", r.InvocationID)
		if err != nil || inv.Status != "failed" {
			t.Fatalf("invocation record: %+v, %v", inv, err)
		}
	})

	t.Run("a handler past its timeout is killed with its VM", func(t *testing.T) {
		t0 := time.Now()
		r, err := c.InvokeFunction(ctx, "py-hello", json.RawMessage(`{"sleep":120}`))
		if err != nil {
			t.Fatalf("invoke: %v", err)
		}
		if r.FunctionError != "Timeout" || r.Error.Type != "Timeout" {
			t.Fatalf("function error %q: %+v", r.FunctionError, r.Error)
		}
		t.Logf("timed out after %v (timeout 4s)", time.Since(t0))
		inv, err := c.GetInvocation(ctx, "py-hello", r.InvocationID)
		if err != nil || inv.Status != "timed_out" {
			t.Fatalf("invocation record: %+v, %v", inv, err)
		}
		sbs, err := c.ListSandboxes(ctx, sdk.ListParams{All: true})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, sb := range sbs {
			if sb.Metadata["pandastack.invocation"] == r.InvocationID {
				found = true
				if sb.State != "killed" {
					t.Fatalf("the timed-out invocation's VM %s is %s, want killed", sb.ID, sb.State)
				}
			}
		}
		if !found {
			t.Fatal("no VM recorded for the timed-out invocation")
		}
	})

	t.Run("the HTTP trigger serves fn-NAME.DOMAIN", func(t *testing.T) {
		f, err := c.GetFunction(ctx, "py-hello")
		if err != nil || f.URL != "http://fn-py-hello.localhost" {
			t.Fatalf("function URL: %+v, %v", f, err)
		}
		post := func(key string) (*http.Response, string) {
			req, _ := http.NewRequest("POST", main.url+"/some/path?who=panda", strings.NewReader("hi"))
			req.Host = "fn-py-hello.localhost"
			if key != "" {
				req.Header.Set("Authorization", "Bearer "+key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, string(b)
		}
		resp, body := post(k.Key)
		if resp.StatusCode != 201 || resp.Header.Get("X-Hello") != "panda" || body != "POST /some/path hi 1" || resp.Header.Get("X-PandaStack-Invocation-Id") == "" {
			t.Fatalf("HTTP trigger: %d %v %q", resp.StatusCode, resp.Header, body)
		}
		if resp, _ := post(""); resp.StatusCode != 401 {
			t.Fatalf("HTTP trigger without a key: %d, want 401", resp.StatusCode)
		}
		otherKey, err := main.client(main.admin).CreateKey(ctx, "fn-other", "e2e-http")
		if err != nil {
			t.Fatal(err)
		}
		if resp, _ := post(otherKey.Key); resp.StatusCode != 404 {
			t.Fatalf("HTTP trigger with another team's key: %d, want 404", resp.StatusCode)
		}
	})

	t.Run("bad bodies and other teams", func(t *testing.T) {
		resp := invokeRaw(t, c, k.Key, "py-hello", "not json")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"code":"invalid_argument"`) {
			t.Fatalf("non-JSON body: %d %s", resp.StatusCode, b)
		}
		if _, err := other.InvokeFunction(ctx, "py-hello", json.RawMessage(`{}`)); !sdk.IsNotFound(err) {
			t.Fatalf("another team's invoke: %v, want 404", err)
		}
		if _, err := other.GetFunction(ctx, "py-hello"); !sdk.IsNotFound(err) {
			t.Fatalf("another team's get: %v, want 404", err)
		}
	})

	t.Run("async invoke answers 202 and can be polled", func(t *testing.T) {
		inv, err := c.InvokeFunctionAsync(ctx, "py-hello", json.RawMessage(`{"name":"later"}`))
		if err != nil || inv.ID == "" {
			t.Fatalf("async invoke: %+v, %v", inv, err)
		}
		eventually(t, 2*time.Minute, "the async invocation to succeed", func() bool {
			got, err := c.GetInvocation(ctx, "py-hello", inv.ID)
			return err == nil && got.Status == "succeeded" && strings.Contains(string(got.Result), `"later"`)
		})
	})

	t.Run("deploys that must fail", func(t *testing.T) {
		_, err := c.DeployFunction(ctx, sdk.FunctionConfig{Name: "py-broken", Runtime: "python", Handler: "main.handler"},
			bundleOf(t, map[string]string{"main.py": "def handler(event, context)\n    return 1\n"}))
		if !sdk.IsInvalid(err) || !strings.Contains(err.Error(), "SyntaxError") {
			t.Fatalf("syntax error deploy: %v, want 400 with the SyntaxError", err)
		}
		_, err = c.DeployFunction(ctx, sdk.FunctionConfig{Name: "py-broken", Runtime: "python", Handler: "missing.handler"},
			bundleOf(t, map[string]string{"main.py": pyHello}))
		if !sdk.IsInvalid(err) || !strings.Contains(err.Error(), "missing.py") {
			t.Fatalf("missing handler file deploy: %v, want 400 naming missing.py", err)
		}
		big := make([]byte, 21<<20)
		_, _ = rand.Read(big)
		_, err = c.DeployFunction(ctx, sdk.FunctionConfig{Name: "py-broken", Runtime: "python", Handler: "main.handler"}, big)
		var apiErr *sdk.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 413 {
			t.Fatalf("oversized bundle: %v, want 413", err)
		}
		if _, err := c.GetFunction(ctx, "py-broken"); !sdk.IsNotFound(err) {
			t.Fatalf("a failed deploy left a function: %v", err)
		}
	})

	t.Run("node ES module and CommonJS handlers", func(t *testing.T) {
		bundle := bundleOf(t, map[string]string{"index.mjs": nodeESM, "legacy.js": nodeCJS})
		fns := []struct{ name, handler, style string }{{"node-esm", "index.handler", "esm"}, {"node-cjs", "legacy.handler", "cjs"}}
		for _, fc := range fns {
			if _, err := c.DeployFunction(ctx, sdk.FunctionConfig{Name: fc.name, Runtime: "node", Handler: fc.handler}, bundle); err != nil {
				t.Fatalf("deploy %s: %v", fc.name, err)
			}
		}
		time.Sleep(3 * time.Second) // the snapshots' clocks fall 3 s behind (see the python case)
		keys := map[string]bool{}
		for _, fc := range fns {
			for i := 0; i < 2; i++ {
				sent := time.Now()
				r, err := c.InvokeFunction(ctx, fc.name, json.RawMessage(`{"name":"panda"}`))
				if err != nil {
					t.Fatalf("invoke %s: %v", fc.name, err)
				}
				m := decodeResult(t, r)
				if m["hello"] != "panda" || m["count"] != float64(1) || m["style"] != fc.style {
					t.Fatalf("%s answered %v; want hello=panda, count=1, style=%s", fc.name, m, fc.style)
				}
				now, _ := m["now"].(float64)
				if at := time.UnixMilli(int64(now)); at.Before(sent.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
					t.Fatalf("%s: the handler's clock read %s, sent at %s: want the host's time", fc.name, at.Format(time.RFC3339Nano), sent.Format(time.RFC3339Nano))
				}
				// A key made with OpenSSL's generators (Node seeds them at
				// its start, before the snapshot): each fresh invocation's
				// must be its own (functions.staleGenerators).
				key, _ := m["key"].(string)
				if key == "" || keys[key] {
					t.Fatalf("%s invocation %d: OpenSSL made key %q, the same as an earlier fresh invocation's (or none)", fc.name, i, key)
				}
				keys[key] = true
				// The restore's hello (functions/hello.go) was the shim's,
				// through its addon: the kernel's RNG reseeded and a new
				// generation token, with no agent woken for it.
				if fc.style == "esm" {
					rand, _ := m["rand"].(string)
					gen, _ := m["generation"].(string)
					asyncKey, _ := m["asyncKey"].(string)
					if len(rand) != 32 || keys[rand] || len(gen) != 32 || keys[gen] || asyncKey == "" || keys[asyncKey] {
						t.Fatalf("%s invocation %d: kernel random %q, generation token %q, thread pool's key %q: want each new", fc.name, i, rand, gen, asyncKey)
					}
					keys[rand], keys[gen], keys[asyncKey] = true, true, true
				}
				eventually(t, 10*time.Second, fc.name+"'s VM greeted by the shim (hello=shim in the server's log)", func() bool {
					return strings.Contains(strings.Join(main.logLines("invocation="+r.InvocationID), "\n"), "hello=shim")
				})
			}
		}
		bigEvent(t, c, "node-esm")
	})

	t.Run("a per-second cron schedule fires with distinct execution ids", func(t *testing.T) {
		for _, bad := range []struct {
			p     sdk.ScheduleParams
			field string
		}{
			{sdk.ScheduleParams{Function: "py-hello", Schedule: "61 * * * *"}, "schedule"},
			{sdk.ScheduleParams{Function: "py-hello", Schedule: "* * * * *", TZ: "Mars/Olympus"}, "tz"},
		} {
			_, err := c.CreateSchedule(ctx, bad.p)
			if !sdk.IsInvalid(err) || !strings.Contains(err.Error(), bad.field) {
				t.Fatalf("schedule %+v: %v, want 400 naming %s", bad.p, err, bad.field)
			}
		}
		sc, err := c.CreateSchedule(ctx, sdk.ScheduleParams{Function: "py-hello", Schedule: "* * * * * *", TZ: "Europe/Paris",
			Data: json.RawMessage(`{"name":"cron"}`)})
		if err != nil {
			t.Fatalf("create schedule: %v", err)
		}
		defer c.DeleteSchedule(context.Background(), sc.ID)
		var runs []sdk.ScheduleRun
		eventually(t, 3*time.Minute, "3 succeeded runs", func() bool {
			runs, err = c.ScheduleRuns(ctx, sc.ID)
			n := 0
			for _, r := range runs {
				if r.Status == "succeeded" {
					n++
				}
			}
			return err == nil && n >= 3
		})
		if err := c.DeleteSchedule(ctx, sc.ID); err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, r := range runs {
			if ids[r.ExecutionID] {
				t.Fatalf("execution id %s twice in %+v", r.ExecutionID, runs)
			}
			ids[r.ExecutionID] = true
			if r.Status != "succeeded" {
				continue
			}
			inv, err := c.GetInvocation(ctx, "py-hello", r.InvocationID)
			var res map[string]any
			if err == nil {
				err = json.Unmarshal(inv.Result, &res)
			}
			if err != nil || inv.Trigger != "cron" || inv.ExecutionID != r.ExecutionID || res["execution"] != r.ExecutionID || res["hello"] != "cron" {
				t.Fatalf("run %+v: invocation %+v (result %v), %v", r, inv, res, err)
			}
			if r.EndedAt == nil || r.DurationMs <= 0 {
				t.Fatalf("run without its time: %+v", r)
			}
		}
		t.Logf("%d runs, statuses: %v", len(runs), statuses(runs))
	})

	t.Run("a redeploy serves as the next version; warm isolation reuses its VM", func(t *testing.T) {
		f, err := c.DeployFunction(ctx, sdk.FunctionConfig{Name: "py-hello", Runtime: "python", Handler: "main.handler",
			Env: map[string]string{"GREETING": "warm"}, Isolation: "warm"}, bundleOf(t, map[string]string{"main.py": pyHello}))
		if err != nil {
			t.Fatalf("redeploy: %v", err)
		}
		if f.Version != 2 || f.Latest.Isolation != "warm" {
			t.Fatalf("redeployed: %+v", f)
		}
		for want := 1; want <= 2; want++ {
			r, err := c.InvokeFunction(ctx, "py-hello", json.RawMessage(`{"name":"warm"}`))
			if err != nil {
				t.Fatal(err)
			}
			m := decodeResult(t, r)
			if m["count"] != float64(want) || m["greeting"] != "warm" {
				t.Fatalf("warm invocation %d answered %v: want count=%d (the same VM), greeting=warm (version 2)", want, m, want)
			}
			if inv, err := c.GetInvocation(ctx, "py-hello", r.InvocationID); err != nil || inv.Version != 2 {
				t.Fatalf("invocation record: %+v, %v", inv, err)
			}
		}
	})

	t.Run("a deleted function is gone", func(t *testing.T) {
		for _, name := range []string{"node-cjs", "py-hello"} {
			if err := c.DeleteFunction(ctx, name); err != nil {
				t.Fatal(err)
			}
			if _, err := c.InvokeFunction(ctx, name, json.RawMessage(`{}`)); !sdk.IsNotFound(err) {
				t.Fatalf("invoke after delete: %v, want 404", err)
			}
		}
		// The warm VM went with it: no function VM is left.
		eventually(t, time.Minute, "no live function VM", func() bool {
			sbs, err := c.ListSandboxes(ctx, sdk.ListParams{})
			if err != nil {
				return false
			}
			for _, sb := range sbs {
				if sb.Metadata["pandastack.function"] != "" {
					return false
				}
			}
			return true
		})
	})
}

func statuses(runs []sdk.ScheduleRun) map[string]int {
	m := map[string]int{}
	for _, r := range runs {
		m[r.Status]++
	}
	return m
}
