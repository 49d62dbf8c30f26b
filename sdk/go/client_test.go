package pandastack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// start runs a fake-backed API server and returns it with a client for team
// "acme".
func start(t *testing.T, configure ...func(*api.Config)) (*apitest.Env, *sdk.Client) {
	t.Helper()
	env := apitest.Start(t, configure...)
	return env, sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(env.Key))
}

func newSandbox(t *testing.T, c *sdk.Client) *sdk.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(context.Background(), sdk.CreateSandboxParams{Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func TestNewClientConfiguration(t *testing.T) {
	var mu sync.Mutex
	var gotAuth, gotUA string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth, gotUA = r.Header.Get("Authorization"), r.Header.Get("User-Agent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ok","version":"x","accel":"kvm","isolation":"hw"}`)
	}))
	defer srv.Close()
	tests := []struct {
		name     string
		env      map[string]string
		opts     []sdk.Option
		wantAuth string
		wantBase string
	}{
		{"API key from env", map[string]string{"PANDASTACK_API_KEY": "k1", "PANDASTACK_BASE_URL": srv.URL}, nil, "Bearer k1", srv.URL},
		{"token fallback", map[string]string{"PANDASTACK_TOKEN": "k2", "PANDASTACK_BASE_URL": srv.URL + "/"}, nil, "Bearer k2", srv.URL},
		{"API key wins over token", map[string]string{"PANDASTACK_API_KEY": "k1", "PANDASTACK_TOKEN": "k2", "PANDASTACK_BASE_URL": srv.URL}, nil, "Bearer k1", srv.URL},
		{"options override env", map[string]string{"PANDASTACK_API_KEY": "k1", "PANDASTACK_BASE_URL": "http://elsewhere"},
			[]sdk.Option{sdk.WithAPIKey("k3"), sdk.WithBaseURL(srv.URL), sdk.WithHTTPClient(srv.Client())}, "Bearer k3", srv.URL},
		{"no key sends none", map[string]string{"PANDASTACK_BASE_URL": srv.URL}, nil, "", srv.URL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"PANDASTACK_API_KEY", "PANDASTACK_TOKEN", "PANDASTACK_BASE_URL"} {
				t.Setenv(k, tt.env[k])
			}
			c := sdk.NewClient(tt.opts...)
			if c.BaseURL() != tt.wantBase {
				t.Fatalf("BaseURL %q, want %q", c.BaseURL(), tt.wantBase)
			}
			if _, err := c.Health(context.Background()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if gotAuth != tt.wantAuth || gotUA != "pandastack-go/"+sdk.Version {
				t.Fatalf("Authorization %q User-Agent %q", gotAuth, gotUA)
			}
		})
	}
	t.Run("default base URL", func(t *testing.T) {
		t.Setenv("PANDASTACK_BASE_URL", "")
		if got := sdk.NewClient().BaseURL(); got != "http://localhost:8080" {
			t.Fatalf("BaseURL %q", got)
		}
	})
}

func TestHealth(t *testing.T) {
	_, c := start(t)
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Status != "ok" || h.Accel != "tcg" || h.Isolation == "" {
		t.Fatalf("health %+v", h)
	}
}

func TestSandboxLifecycle(t *testing.T) {
	ctx := context.Background()
	_, c := start(t)
	sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{
		Template: "base", TTLSeconds: 120, Metadata: map[string]string{"job": "7"}, Env: map[string]string{"A": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID == "" || !sb.Live() || sb.Template != "base" || sb.Metadata["job"] != "7" || sb.ExpiresAt.Sub(sb.CreatedAt) != 2*time.Minute {
		t.Fatalf("created %+v", sb)
	}
	other := newSandbox(t, c)

	got, err := c.GetSandbox(ctx, sb.ID)
	if err != nil || got.ID != sb.ID {
		t.Fatalf("GetSandbox = %+v, %v", got, err)
	}
	list, err := c.ListSandboxes(ctx, sdk.ListParams{Metadata: map[string]string{"job": "7"}})
	if err != nil || len(list) != 1 || list[0].ID != sb.ID {
		t.Fatalf("ListSandboxes(job=7) = %v, %v", list, err)
	}
	// Handles from a list work.
	if _, err := list[0].Exec(ctx, "echo", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}

	before := sb.ExpiresAt
	if err := sb.SetTTL(ctx, 3600); err != nil {
		t.Fatal(err)
	}
	if !sb.ExpiresAt.After(before) {
		t.Fatalf("SetTTL did not update ExpiresAt: %v -> %v", before, sb.ExpiresAt)
	}

	if err := sb.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sb.Kill(ctx); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := sb.Refresh(ctx); err != nil || sb.State != "killed" || sb.EndedAt == nil || sb.Live() {
		t.Fatalf("after kill %+v, %v", sb, err)
	}
	_, err = sb.Exec(ctx, "echo", sdk.ExecOptions{})
	if !sdk.IsGone(err) {
		t.Fatalf("exec on killed sandbox: %v, want gone", err)
	}
	live, _ := c.ListSandboxes(ctx, sdk.ListParams{})
	all, _ := c.ListSandboxes(ctx, sdk.ListParams{All: true})
	if len(live) != 1 || live[0].ID != other.ID || len(all) != 2 {
		t.Fatalf("live %d all %d", len(live), len(all))
	}
	// A handle made from an id works like a fetched one.
	h := c.Sandbox(other.ID)
	if err := h.Refresh(ctx); err != nil || h.Template != "base" {
		t.Fatalf("Sandbox(id).Refresh: %+v, %v", h, err)
	}
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	_, c := start(t)
	sb := newSandbox(t, c)
	tests := []struct {
		name     string
		cmd      string
		opts     sdk.ExecOptions
		stdout   string
		stderr   string
		exitCode int
		timedOut bool
		signal   string
	}{
		{name: "shell command", cmd: "echo hi; err oops; exit 3", stdout: "hi\n", stderr: "oops\n", exitCode: 3},
		{name: "binary output", cmd: "hex 00ff10", stdout: "\x00\xff\x10"},
		{name: "args without shell", cmd: "echo", opts: sdk.ExecOptions{Args: []string{"a;b", "c"}}, stdout: "a;b c\n"},
		{name: "args only", opts: sdk.ExecOptions{Args: []string{"echo", "x"}}, stdout: "x\n"},
		{name: "binary stdin", cmd: "cat", opts: sdk.ExecOptions{Stdin: []byte{0, 1, 0xfe}}, stdout: "\x00\x01\xfe"},
		{name: "env cwd user", cmd: "getenv K; pwd; whoami", opts: sdk.ExecOptions{Env: map[string]string{"K": "v"}, Cwd: "/tmp", User: "app"}, stdout: "v\n/tmp\napp\n"},
		{name: "timeout", cmd: "echo a; sleep 5", opts: sdk.ExecOptions{TimeoutSeconds: 0.05}, stdout: "a\n", exitCode: 137, timedOut: true, signal: "SIGKILL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sb.Exec(ctx, tt.cmd, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != tt.stdout || string(res.Stderr) != tt.stderr || res.ExitCode != tt.exitCode ||
				res.TimedOut != tt.timedOut || res.Signal != tt.signal || res.PID <= 0 {
				t.Fatalf("result %+v (stdout %q stderr %q)", res, res.Stdout, res.Stderr)
			}
		})
	}
	t.Run("invalid request", func(t *testing.T) {
		_, err := sb.Exec(ctx, "", sdk.ExecOptions{})
		if !sdk.IsInvalid(err) {
			t.Fatalf("err %v, want invalid", err)
		}
	})
}

func TestExecLargeOutputStreams(t *testing.T) {
	_, c := start(t, func(cfg *api.Config) { cfg.MaxBufferedOutput = 64 << 10 })
	sb := newSandbox(t, c)
	var seen int
	res, err := sb.Exec(context.Background(), "yes 3000000", sdk.ExecOptions{OnStdout: func(b []byte) { seen += len(b) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 3000000 || seen != 3000000 {
		t.Fatalf("stdout %d bytes, callbacks saw %d", len(res.Stdout), seen)
	}
	res, err = sb.Exec(context.Background(), "yes 1000", sdk.ExecOptions{DiscardOutput: true, OnStdout: func([]byte) {}})
	if err != nil || len(res.Stdout) != 0 {
		t.Fatalf("DiscardOutput kept %d bytes (%v)", len(res.Stdout), err)
	}
}

// TestExecCallbacksAreLive: OnStdout fires while the command still runs.
func TestExecCallbacksAreLive(t *testing.T) {
	env, c := start(t)
	sb := newSandbox(t, c)
	called := make(chan struct{})
	env.Engine.GuestOf(sb.ID).ExecHook = func(ctx context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		fn(pandastack.ExecEvent{Type: "start", PID: 3})
		fn(pandastack.ExecEvent{Type: "stdout", Data: []byte("tick")})
		select {
		case <-called:
		case <-time.After(5 * time.Second):
			return pandastack.ExecResult{}, errors.New("callback did not fire while running")
		}
		return pandastack.ExecResult{ExitCode: 0}, nil
	}
	var once sync.Once
	res, err := sb.Exec(context.Background(), "x", sdk.ExecOptions{OnStdout: func([]byte) { once.Do(func() { close(called) }) }})
	if err != nil || string(res.Stdout) != "tick" {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
}

func TestExecCancel(t *testing.T) {
	env, c := start(t)
	sb := newSandbox(t, c)
	killed := make(chan struct{})
	env.Engine.GuestOf(sb.ID).ExecHook = func(ctx context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		fn(pandastack.ExecEvent{Type: "start", PID: 3})
		<-ctx.Done()
		close(killed)
		return pandastack.ExecResult{}, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := sb.Exec(ctx, "x", sdk.ExecOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want deadline exceeded", err)
	}
	select {
	case <-killed:
	case <-time.After(5 * time.Second):
		t.Fatal("server-side command was not canceled")
	}
}

func TestStreamErrorIsAPIError(t *testing.T) {
	env, c := start(t)
	sb := newSandbox(t, c)
	env.Engine.GuestOf(sb.ID).ExecHook = func(_ context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		fn(pandastack.ExecEvent{Type: "start", PID: 3})
		fn(pandastack.ExecEvent{Type: "stdout", Data: []byte("partial")})
		return pandastack.ExecResult{}, pandastack.Errorf(pandastack.EUnavailable, "guest agent stopped answering")
	}
	res, err := sb.Exec(context.Background(), "x", sdk.ExecOptions{})
	var ae *sdk.APIError
	if !errors.As(err, &ae) || ae.Code != "unavailable" || ae.Status != 0 || ae.Message != "guest agent stopped answering" {
		t.Fatalf("err %#v", err)
	}
	if string(res.Stdout) != "partial" {
		t.Fatalf("partial output lost: %q", res.Stdout)
	}
}

func TestBackgroundAttachSignal(t *testing.T) {
	ctx := context.Background()
	_, c := start(t)
	sb := newSandbox(t, c)
	pid, err := sb.StartBackground(ctx, "echo up; sleep 30", sdk.ExecOptions{})
	if err != nil || pid <= 0 {
		t.Fatalf("StartBackground = %d, %v", pid, err)
	}
	ps, err := sb.Processes(ctx)
	if err != nil || len(ps) != 1 || ps[0].PID != pid || !ps[0].Running || !ps[0].Background {
		t.Fatalf("Processes = %+v, %v", ps, err)
	}
	var out bytes.Buffer
	done := make(chan *sdk.ExecResult)
	go func() {
		res, err := sb.Attach(ctx, pid, sdk.AttachOptions{OnStdout: func(b []byte) { out.Write(b) }})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	time.Sleep(50 * time.Millisecond)
	if err := sb.Signal(ctx, pid, "TERM"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res == nil || res.Signal != "SIGTERM" || res.ExitCode != 143 || string(res.Stdout) != "up\n" || out.String() != "up\n" {
		t.Fatalf("attach result %+v", res)
	}
	if err := sb.Signal(ctx, 999999, "TERM"); !sdk.IsNotFound(err) {
		t.Fatalf("signal unknown pid: %v", err)
	}
}

func TestFiles(t *testing.T) {
	ctx := context.Background()
	_, c := start(t)
	fs := newSandbox(t, c).Files()

	if _, err := fs.Write(ctx, "/tmp/hello.txt", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if b, err := fs.Read(ctx, "/tmp/hello.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("Read = %q, %v", b, err)
	}

	// Streamed upload from a pipe (unknown length) and streamed download.
	big := make([]byte, 5<<20+3)
	rand.Read(big)
	pr, pw := io.Pipe()
	go func() {
		for off := 0; off < len(big); off += 100_000 {
			pw.Write(big[off:min(off+100_000, len(big))])
		}
		pw.Close()
	}()
	fi, err := fs.WriteFrom(ctx, "/tmp/big.bin", pr, 0o600)
	if err != nil || fi.Size != int64(len(big)) || fi.Perm() != 0o600 {
		t.Fatalf("WriteFrom = %+v, %v", fi, err)
	}
	var got bytes.Buffer
	n, err := fs.ReadTo(ctx, "/tmp/big.bin", &got)
	if err != nil || n != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
		t.Fatalf("ReadTo = %d, %v (equal %v)", n, err, bytes.Equal(got.Bytes(), big))
	}

	if err := fs.MakeDir(ctx, "/work/a/b"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(ctx, "/tmp/hello.txt", "/work/a/hello.txt"); err != nil {
		t.Fatal(err)
	}
	entries, err := fs.List(ctx, "/work/a")
	if err != nil || len(entries) != 2 || entries[0].Name != "b" || !entries[0].IsDir || entries[1].Name != "hello.txt" {
		t.Fatalf("List = %+v, %v", entries, err)
	}
	st, err := fs.Stat(ctx, "/work/a/hello.txt")
	if err != nil || st.Size != 5 || st.Perm() != 0o644 {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	for path, want := range map[string]bool{"/work/a/hello.txt": true, "/tmp/hello.txt": false} {
		if ok, err := fs.Exists(ctx, path); err != nil || ok != want {
			t.Fatalf("Exists(%s) = %v, %v", path, ok, err)
		}
	}
	if err := fs.Remove(ctx, "/work", false); !sdk.IsConflict(err) {
		t.Fatalf("Remove non-empty without recursive: %v", err)
	}
	if err := fs.Remove(ctx, "/work", true); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Read(ctx, "/work/a/hello.txt"); !sdk.IsNotFound(err) {
		t.Fatalf("Read removed file: %v", err)
	}
	if _, err := fs.Read(ctx, "relative"); !sdk.IsInvalid(err) {
		t.Fatalf("Read relative path: %v", err)
	}
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	env, c := start(t)
	tests := []struct {
		name   string
		call   func() error
		is     error
		check  func(error) bool
		status int
	}{
		{"unknown sandbox", func() error { _, err := c.GetSandbox(ctx, "sb_nope"); return err }, sdk.ErrNotFound, sdk.IsNotFound, 404},
		{"wrong key", func() error {
			_, err := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey("pds_wrong")).ListSandboxes(ctx, sdk.ListParams{})
			return err
		}, sdk.ErrUnauthorized, sdk.IsUnauthorized, 401},
		{"admin only", func() error { _, err := c.CreateKey(ctx, "x", ""); return err }, sdk.ErrForbidden, sdk.IsForbidden, 403},
		{"bad template", func() error { _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{}); return err }, sdk.ErrInvalid, sdk.IsInvalid, 400},
		{"unknown template", func() error {
			_, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "nope"})
			return err
		}, sdk.ErrNotFound, sdk.IsNotFound, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *sdk.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err %v is not an *APIError", err)
			}
			if !errors.Is(err, tt.is) || !tt.check(err) || ae.Status != tt.status || ae.RequestID == "" || ae.Message == "" {
				t.Fatalf("err %#v", ae)
			}
			if errors.Is(err, sdk.ErrInternal) {
				t.Fatal("matches a different code")
			}
			if !strings.HasPrefix(err.Error(), "pandastack: "+ae.Code+": ") {
				t.Fatalf("Error() = %q", err.Error())
			}
		})
	}
	t.Run("quota", func(t *testing.T) {
		_, c := start(t, func(cfg *api.Config) { cfg.MaxLiveSandboxesPerTeam = 1 })
		newSandbox(t, c)
		_, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "base"})
		if !sdk.IsQuotaExceeded(err) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("non-JSON error from a proxy", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		}))
		defer srv.Close()
		_, err := sdk.NewClient(sdk.WithBaseURL(srv.URL)).Health(ctx)
		var ae *sdk.APIError
		if !sdk.IsUnavailable(err) || !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, "bad gateway") {
			t.Fatalf("err %#v", err)
		}
	})
}

func TestTemplatesAndKeys(t *testing.T) {
	ctx := context.Background()
	env, c := start(t)
	admin := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(env.AdminKey))

	ts, err := c.Templates(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "base" || ts[0].ID == "" {
		t.Fatalf("Templates = %+v, %v", ts, err)
	}
	var lines []string
	tpl, err := admin.BuildTemplate(ctx, "python", func(l string) { lines = append(lines, l) })
	if err != nil || tpl.Name != "python" || strings.Join(lines, "|") != "resolving inputs|baking snapshot" {
		t.Fatalf("BuildTemplate = %+v, %v; lines %q", tpl, err, lines)
	}
	env.Builder.Fail = func(string) error { return pandastack.Errorf(pandastack.EInvalid, "bad recipe") }
	if _, err := admin.BuildTemplate(ctx, "broken", nil); !sdk.IsInvalid(err) {
		t.Fatalf("failed build: %v", err)
	}

	k, err := admin.CreateKey(ctx, "initech", "ci")
	if err != nil || !strings.HasPrefix(k.Key, "pds_") || k.Team != "initech" || k.Name != "ci" {
		t.Fatalf("CreateKey = %+v, %v", k, err)
	}
	// The new key works, and sees only its team.
	newClient := sdk.NewClient(sdk.WithBaseURL(env.URL), sdk.WithAPIKey(k.Key))
	mine := newSandbox(t, c)
	if _, err := newClient.GetSandbox(ctx, mine.ID); !sdk.IsNotFound(err) {
		t.Fatalf("other team's sandbox: %v", err)
	}
}
