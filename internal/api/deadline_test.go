package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

const bodyTimeout = 100 * time.Millisecond

func startBounded(t *testing.T) *apitest.Env {
	return apitest.Start(t, func(c *api.Config) { c.BodyReadTimeout = bodyTimeout })
}

// A client that sends headers and then stops sending its body is answered
// and let go, instead of holding a connection and a handler forever.
func TestStalledBodyIsCut(t *testing.T) {
	env := startBounded(t)
	sb := newSandbox(t, env, env.Key, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a guard, not the measure
	fmt.Fprintf(c, "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"cmd\":", sb.ID, env.Key)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "did not arrive within") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// The body deadline ends with the body (net/http clears the connection's
// read deadline once the body is read): a streamed exec whose request was
// read long ago runs on for as long as the command does. A deadline put on
// the request's context instead would fail this.
func TestStreamOutlivesTheBodyDeadline(t *testing.T) {
	env := startBounded(t)
	sb := newSandbox(t, env, env.Key, nil)
	env.Engine.GuestOf(sb.ID).ExecHook = func(ctx context.Context, _ pandastack.ExecRequest, _ io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
		fn(pandastack.ExecEvent{Type: "start", PID: 7})
		select {
		case <-ctx.Done():
			return pandastack.ExecResult{}, ctx.Err()
		case <-time.After(10 * bodyTimeout):
		}
		fn(pandastack.ExecEvent{Type: "stdout", Data: []byte("still here\n")})
		return pandastack.ExecResult{ExitCode: 0}, nil
	}
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/exec", key: env.Key,
		header: map[string]string{"Accept": "application/x-ndjson"}, body: map[string]any{"cmd": "long"}})
	evs := events(t, r)
	last := evs[len(evs)-1]
	if len(evs) != 3 || string(evs[1].Data) != "still here\n" || last.Type != "exit" {
		t.Fatalf("events %+v: the stream was cut", evs)
	}
}

// An upload streams for as long as it takes: the file handler lifts the
// deadline.
func TestSlowUploadIsNotCut(t *testing.T) {
	env := startBounded(t)
	sb := newSandbox(t, env, env.Key, nil)
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 5; i++ {
			fmt.Fprintf(pw, "chunk %d\n", i)
			time.Sleep(bodyTimeout)
		}
		pw.Close()
	}()
	r := call(t, env, req{method: "PUT", path: "/v1/sandboxes/" + sb.ID + "/files?path=/tmp/slow.txt", key: env.Key, body: io.Reader(pr)})
	wantStatus(t, r, 200)
	got := call(t, env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/files?path=/tmp/slow.txt", key: env.Key})
	if !strings.HasSuffix(string(got.Body), "chunk 4\n") {
		t.Fatalf("uploaded %q", got.Body)
	}
}
