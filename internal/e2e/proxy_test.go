package e2e

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

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A small server for the sandbox: plain, streamed and upgraded responses.
const portServer = `import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path == "/stream":
            self.send_response(200); self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            for i in range(3):
                line = ("tick %d\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line)); self.wfile.flush(); time.sleep(0.7)
            self.wfile.write(b"0\r\n\r\n"); return
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101); self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade"); self.end_headers(); self.wfile.flush()
            while True:
                b = self.rfile.read1(4096)
                if not b: break
                self.wfile.write(b.upper()); self.wfile.flush()
            return
        body = ("hello from %s auth=%s" % (self.headers.get("Host"), self.headers.get("Authorization"))).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H).serve_forever()
`

func proxyGet(t *testing.T, host, path, key string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", main.url+path, nil)
	req.Host = host
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return http.DefaultClient.Do(req)
}

func TestExposedPorts(t *testing.T) {
	ctx := context.Background()
	k, err := main.client(main.admin).CreateKey(ctx, "ports", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := main.client(k.Key)
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	if _, err := sb.Files().Write(ctx, "/root/srv.py", []byte(portServer)); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.StartBackground(ctx, "python3 /root/srv.py", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	host := fmt.Sprintf("8000-%s.localhost", sb.ID)
	var body string
	eventually(t, 30*time.Second, "the sandbox's server to answer through the proxy", func() bool {
		resp, err := proxyGet(t, host, "/", k.Key)
		if err != nil || resp.StatusCode != 200 {
			if resp != nil {
				resp.Body.Close()
			}
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return true
	})
	if body != "hello from "+host+" auth=None" {
		t.Fatalf("body %q (the API key must not reach the sandbox)", body)
	}

	t.Run("streamed response", func(t *testing.T) {
		resp, err := proxyGet(t, host, "/stream", k.Key)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		line, err := br.ReadString('\n')
		first := time.Now()
		if err != nil || line != "tick 0\n" {
			t.Fatalf("first line %q %v", line, err)
		}
		rest, _ := io.ReadAll(br)
		// The server sleeps 0.7 s after each of its three lines: the first
		// must arrive well before the body ends, or it was buffered.
		if d := time.Since(first); d < time.Second || string(rest) != "tick 1\ntick 2\n" {
			t.Fatalf("first line only %v before the end (rest %q): the response was buffered", d, rest)
		}
	})

	t.Run("upgraded connection (WebSocket handshake) carries bytes both ways", func(t *testing.T) {
		nc, err := net.Dial("tcp", strings.TrimPrefix(main.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(nc, "GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", host, k.Key)
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("upgrade: %v %v", err, resp)
		}
		io.WriteString(nc, "ping")
		buf := make([]byte, 4)
		if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "PING" {
			t.Fatalf("echo %q %v", buf, err)
		}
	})

	ko, err := main.client(main.admin).CreateKey(ctx, "ports-other", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	otherKey := ko.Key
	for _, tc := range []struct {
		name, host, key string
		status          int
		code            string
	}{
		{"no key", host, "", 401, "unauthorized"},
		{"another team's key", host, otherKey, 404, "not_found"},
		{"nothing listens", fmt.Sprintf("9-%s.localhost", sb.ID), k.Key, 502, "connection_refused"},
		{"port out of range", fmt.Sprintf("70000-%s.localhost", sb.ID), k.Key, 400, "invalid_argument"},
		{"unknown sandbox", "8000-sbx_0123456789abcdef0123.localhost", k.Key, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Now()
			status, code, _ := call(t, "GET", "/", tc.key, "", "Host", tc.host)
			if status != tc.status || code != tc.code {
				t.Fatalf("got %d %s, want %d %s", status, code, tc.status, tc.code)
			}
			if d := time.Since(t0); d > 5*time.Second {
				t.Fatalf("took %v", d)
			}
		})
	}
}
