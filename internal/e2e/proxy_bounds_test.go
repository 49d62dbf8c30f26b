package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// hostileWS is a sandbox service that upgrades the first connection to a
// WebSocket and sends one binary frame announcing 1 GiB, then its bytes as
// fast as the connection takes them, writing how many it got out to
// /tmp/ws-sent.
const hostileWS = `
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8765)); s.listen()
while True:  # a connection that ends before its request (a probe) is skipped
    c, _ = s.accept()
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = c.recv(4096)
        if not b:
            break
        buf += b
    if b"\r\n\r\n" in buf:
        break
    c.close()
c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n")
c.sendall(bytes([0x82, 127]) + (1 << 30).to_bytes(8, "big"))
chunk, sent = b"A" * 65536, 0
while sent < 1 << 30:
    c.sendall(chunk); sent += len(chunk)
    if sent % (1 << 20) == 0:
        open("/tmp/ws-sent.tmp", "w").write(str(sent)); __import__("os").rename("/tmp/ws-sent.tmp", "/tmp/ws-sent")
`

// rssBytes is a process's resident memory.
func rssBytes(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A WebSocket frame far larger than anyone should hold (1 GiB) passes
// through the port proxy as a stream: with a client that stops reading,
// the sandbox is held back (back-pressure through the proxy, the guest
// channel and the agent) and the server's memory does not grow with the
// frame.
func TestProxyWebSocketFrameStreams(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, main.client(main.admin), sdk.CreateSandboxParams{})
	if _, err := sb.Exec(ctx, "cat > /tmp/ws.py", sdk.ExecOptions{Stdin: []byte(hostileWS), TimeoutSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.StartBackground(ctx, "python3 /tmp/ws.py >/tmp/ws.log 2>&1", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the sandbox service to listen", func() bool {
		_, code := netSh(t, sb, `python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8765)).close()'`)
		return code == 0
	})
	pid := main.cmd.Process.Pid
	before := rssBytes(t, pid)
	u, _ := url.Parse(main.url)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: 8765-%s.localhost\r\nAuthorization: Bearer %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", sb.ID, main.admin)
	br := bufio.NewReader(conn)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 101 ") {
		t.Fatalf("upgrade through the proxy: %q %v", status, err)
	}
	// Read 1 MiB of the frame, then stop reading.
	if _, err := io.CopyN(io.Discard, br, 1<<20); err != nil {
		t.Fatal(err)
	}
	sent := func() int64 {
		out, _ := netSh(t, sb, "cat /tmp/ws-sent 2>/dev/null || echo 0")
		n, _ := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		return n
	}
	// Wait until the sandbox is held back: what it got out stops growing.
	last := int64(-1)
	eventually(t, 3*time.Minute, "the sandbox's sending to stall", func() bool {
		n := sent()
		stalled := n == last
		last = n
		if !stalled {
			time.Sleep(2 * time.Second)
		}
		return stalled
	})
	grew := rssBytes(t, pid) - before
	t.Logf("client read 1 MiB; sandbox got %d MiB out of its 1 GiB frame; server RSS grew %.1f MiB", last>>20, float64(grew)/(1<<20))
	if last >= 256<<20 {
		t.Errorf("the sandbox got %d MiB out to a client that read 1 MiB: something buffers the frame", last>>20)
	}
	if grew > 64<<20 {
		t.Errorf("server RSS grew %d MiB while a 1 GiB frame waited for a client that stopped reading", grew>>20)
	}
}
