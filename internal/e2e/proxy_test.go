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
	"golang.org/x/net/websocket"
)

// A small server for the sandbox: plain, streamed and upgraded responses.
const portServer = `import base64, hashlib, http.server, struct, time
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
            # RFC 6455: the handshake, then echo each text frame upper-cased.
            key = self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
            self.send_response(101); self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode()); self.end_headers(); self.wfile.flush()
            while True:
                h = self.rfile.read(2)
                if len(h) < 2: break
                op, n = h[0] & 15, h[1] & 127
                if n == 126: n = struct.unpack(">H", self.rfile.read(2))[0]
                elif n == 127: n = struct.unpack(">Q", self.rfile.read(8))[0]
                mask = self.rfile.read(4) if h[1] & 128 else b"\0\0\0\0"
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                if op == 8: self.wfile.write(b"\x88\x00"); self.wfile.flush(); break
                out = data.upper()
                size = bytes([len(out)]) if len(out) < 126 else b"\x7e" + struct.pack(">H", len(out))
                self.wfile.write(bytes([0x80 | op]) + size + out); self.wfile.flush()
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

	t.Run("WebSocket through the proxy, a real client", func(t *testing.T) {
		cfg, err := websocket.NewConfig("ws://"+host+"/ws", "http://"+host)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Header.Set("Authorization", "Bearer "+k.Key)
		nc, err := net.Dial("tcp", strings.TrimPrefix(main.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(60 * time.Second))
		ws, err := websocket.NewClient(cfg, nc) // checks Sec-WebSocket-Accept
		if err != nil {
			t.Fatalf("websocket handshake through the proxy: %v", err)
		}
		defer ws.Close()
		for _, msg := range []string{"ping", strings.Repeat("long message ", 100)} {
			if err := websocket.Message.Send(ws, msg); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := websocket.Message.Receive(ws, &got); err != nil {
				t.Fatal(err)
			}
			if got != strings.ToUpper(msg) {
				t.Fatalf("echo of %d bytes: got %q", len(msg), got)
			}
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
