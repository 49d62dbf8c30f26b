package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// call makes a raw HTTP request and decodes the error body, if any.
func call(t *testing.T, method, path, key, body string, hdr ...string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, main.url+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code, e.Error.Message
}

func TestBadInput(t *testing.T) {
	c := teamClient(t, "badinput")
	k, err := main.client(main.admin).CreateKey(context.Background(), "badinput2", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	key := k.Key
	sb := newSandbox(t, main.client(key), sdk.CreateSandboxParams{})
	dead := newSandbox(t, c, sdk.CreateSandboxParams{})
	other := dead.ID
	_ = dead.Kill(context.Background())
	killedKey := key
	deadOwn := newSandbox(t, main.client(key), sdk.CreateSandboxParams{})
	_ = deadOwn.Kill(context.Background())
	before := steadyVMDirs()

	tests := []struct {
		name, method, path, key, body string
		hdr                           []string
		status                        int
		code                          string
		msgHas                        string
	}{
		{"missing key", "GET", "/v1/sandboxes", "", "", nil, 401, "unauthorized", "missing"},
		{"wrong key", "GET", "/v1/sandboxes", "pds_notarealkey000000000000000000000000000", "", nil, 401, "unauthorized", "invalid"},
		{"malformed JSON", "POST", "/v1/sandboxes", key, `{"template": "base",`, nil, 400, "invalid_argument", ""},
		{"unknown field", "POST", "/v1/sandboxes", key, `{"template":"base","ttl":5}`, nil, 400, "invalid_argument", "ttl"},
		{"unknown template", "POST", "/v1/sandboxes", key, `{"template":"no-such-template"}`, nil, 404, "not_found", "no-such-template"},
		{"negative TTL", "POST", "/v1/sandboxes", key, `{"template":"base","ttl_seconds":-5}`, nil, 400, "invalid_argument", "ttl_seconds"},
		{"absurd TTL", "POST", "/v1/sandboxes", key, `{"template":"base","ttl_seconds":315360000}`, nil, 400, "invalid_argument", "ttl_seconds"},
		{"another team's sandbox", "GET", "/v1/sandboxes/" + other, key, "", nil, 404, "not_found", ""},
		{"exec in another team's sandbox", "POST", "/v1/sandboxes/" + other + "/exec", key, `{"cmd":"true"}`, nil, 404, "not_found", ""},
		{"exec in a killed sandbox", "POST", "/v1/sandboxes/" + deadOwn.ID + "/exec", killedKey, `{"cmd":"true"}`, nil, 410, "gone", "killed"},
		{"exec without a command", "POST", "/v1/sandboxes/" + sb.ID + "/exec", key, `{}`, nil, 400, "invalid_argument", ""},
		{"path that does not exist", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=/no/such/file", key, "", nil, 404, "not_found", "/no/such/file"},
		{"relative path", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=etc/passwd", key, "", nil, 400, "invalid_argument", ""},
		{"read a directory", "GET", "/v1/sandboxes/" + sb.ID + "/files?path=/etc", key, "", nil, 400, "invalid_argument", "directory"},
		{"program not found", "POST", "/v1/sandboxes/" + sb.ID + "/exec", key, `{"args":["no-such-program"]}`, nil, 404, "not_found", "no-such-program"},
		{"50 MB buffered output", "POST", "/v1/sandboxes/" + sb.ID + "/exec", key, `{"cmd":"head -c 52428800 /dev/zero"}`, nil, 422, "output_too_large", "stream"},
		{"unknown sandbox", "DELETE", "/v1/sandboxes/sbx_00000000000000000000", key, "", nil, 404, "not_found", ""},
		{"admin route with a team key", "POST", "/v1/keys", key, `{"team":"x"}`, nil, 403, "forbidden", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, code, msg := call(t, tc.method, tc.path, tc.key, tc.body, tc.hdr...)
			if status != tc.status || code != tc.code || !strings.Contains(msg, tc.msgHas) {
				t.Fatalf("got %d %s %q, want %d %s containing %q", status, code, msg, tc.status, tc.code, tc.msgHas)
			}
		})
	}
	// None of that leaked a VM, and the sandbox still works.
	if after := steadyVMDirs(); after > before {
		t.Errorf("vm dirs grew from %d to %d", before, after)
	}
	if r, err := sb.Exec(context.Background(), "echo fine", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "fine\n" {
		t.Fatalf("sandbox after bad input: %v", err)
	}
	// A timeout is a result, not an error.
	r, err := sb.Exec(context.Background(), "sleep 30", sdk.ExecOptions{TimeoutSeconds: 0.5})
	if err != nil || !r.TimedOut {
		t.Fatalf("exec past its timeout: %v %+v", err, r)
	}
}

func TestTenantIsolation(t *testing.T) {
	ctx := context.Background()
	a := teamClient(t, "tenant-a")
	b := teamClient(t, "tenant-b")
	sa := newSandbox(t, a, sdk.CreateSandboxParams{Metadata: map[string]string{"owner": "a"}})
	if _, err := b.GetSandbox(ctx, sa.ID); !sdk.IsNotFound(err) {
		t.Fatalf("team b got team a's sandbox: %v", err)
	}
	if _, err := b.Sandbox(sa.ID).Exec(ctx, "true", sdk.ExecOptions{}); !sdk.IsNotFound(err) {
		t.Fatalf("team b ran a command in team a's sandbox: %v", err)
	}
	if _, err := b.Sandbox(sa.ID).Files().Read(ctx, "/etc/hostname"); !sdk.IsNotFound(err) {
		t.Fatalf("team b read team a's file: %v", err)
	}
	if err := b.Sandbox(sa.ID).Kill(ctx); !sdk.IsNotFound(err) {
		t.Fatalf("team b killed team a's sandbox: %v", err)
	}
	l, err := b.ListSandboxes(ctx, sdk.ListParams{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l {
		if s.ID == sa.ID {
			t.Fatal("team b lists team a's sandbox")
		}
	}
	if _, err := sa.Exec(ctx, "true", sdk.ExecOptions{}); err != nil {
		t.Fatalf("team a's sandbox was hurt: %v", err)
	}
}

// steadyVMDirs counts the server's VM directories once the pool has stopped
// refilling (the count unchanged for a second).
func steadyVMDirs() int {
	n := len(vmDirs(main.dataDir))
	for i := 0; i < 30; i++ {
		time.Sleep(time.Second)
		m := len(vmDirs(main.dataDir))
		if m == n {
			return n
		}
		n = m
	}
	return n
}
