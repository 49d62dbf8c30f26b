package e2bcompat_test

import (
	"testing"
)

// lifecycle.onTimeout and autoResume as the SDK sends them (autoPause,
// autoResume.enabled) come back in info's lifecycle; a paused sandbox
// without autoResume answers its data plane 502 until connect resumes it,
// one with autoResume is reached (and so woken) by traffic.
func TestLifecycle(t *testing.T) {
	env := start(t)
	key := []string{"X-API-Key", env.Key}
	cases := []struct {
		name, body       string
		onTimeout        string
		autoResume       bool
		trafficReachesIt bool
	}{
		{"default", `{"templateID":"base"}`, "kill", false, false},
		{"pause", `{"templateID":"base","autoPause":true}`, "pause", false, false},
		{"pause, filesystem only (kept whole here)", `{"templateID":"base","autoPause":true,"autoPauseMemory":false}`, "pause", false, false},
		{"pause and auto-resume", `{"templateID":"base","autoPause":true,"autoResume":{"enabled":true}}`, "pause", true, true},
		{"pause, auto-resume off", `{"templateID":"base","autoPause":true,"autoResume":{"enabled":false}}`, "pause", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			created := do(t, env, "POST", "/v2/sandboxes", c.body, key...)
			if created.status != 201 {
				t.Fatalf("create: %d %s", created.status, created.raw)
			}
			id, _ := created.body["sandboxID"].(string)
			token, _ := created.body["envdAccessToken"].(string)
			info := do(t, env, "GET", "/sandboxes/"+id, "", key...)
			lc, _ := info.body["lifecycle"].(map[string]any)
			if info.status != 200 || lc["onTimeout"] != c.onTimeout || lc["autoResume"] != c.autoResume {
				t.Fatalf("info: %d %s, want lifecycle {onTimeout:%s, autoResume:%v}", info.status, info.raw, c.onTimeout, c.autoResume)
			}
			if md, _ := info.body["metadata"].(map[string]any); len(md) != 0 {
				t.Fatalf("info shows metadata this package keeps: %v", md)
			}
			if r := do(t, env, "POST", "/sandboxes/"+id+"/pause", `{}`, key...); r.status != 204 {
				t.Fatalf("pause: %d %s", r.status, r.raw)
			}
			r := do(t, env, "POST", "/filesystem.Filesystem/Stat", `{"path":"/"}`, "E2b-Sandbox-Id", id,
				"E2b-Sandbox-Port", "49983", "X-Access-Token", token, "Connect-Protocol-Version", "1")
			if c.trafficReachesIt {
				if r.status == 502 {
					t.Fatalf("envd call to a paused auto-resume sandbox: %d %s, want it served", r.status, r.raw)
				}
			} else if r.status != 502 || r.body["code"] != float64(502) || r.body["sandboxId"] != id {
				t.Fatalf("envd call to a paused sandbox: %d %s, want 502 JSON", r.status, r.raw)
			}
			if r := do(t, env, "POST", "/v2/sandboxes/"+id+"/connect", `{}`, key...); r.status != 200 && r.status != 201 {
				t.Fatalf("connect: %d %s", r.status, r.raw)
			}
			if info := do(t, env, "GET", "/sandboxes/"+id, "", key...); info.body["state"] != "running" {
				t.Fatalf("after connect: %s", info.raw)
			}
		})
	}
}
