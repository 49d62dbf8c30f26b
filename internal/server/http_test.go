package server

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func serveWith(t *testing.T, lim httpLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }), lim, slog.New(slog.DiscardHandler))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// An idle keep-alive connection is closed by the server: a client cannot
// hold connections (descriptors, memory) open for free.
func TestIdleConnectionsAreClosed(t *testing.T) {
	lim := defaultLimits
	lim.Idle = 200 * time.Millisecond
	addr := serveWith(t, lim)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) // a guard, not the measure
	fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "ok" {
		t.Fatalf("body %q", b)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: %v, want closed by the server", err)
	}
}

// A client that never finishes its headers is cut off.
func TestSlowHeadersAreCut(t *testing.T) {
	lim := defaultLimits
	lim.ReadHeader = 200 * time.Millisecond
	c, err := net.Dial("tcp", serveWith(t, lim))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("read: %v, want the server to close", err)
	}
}

// Headers are tenant-controlled (proxied requests carry anything): the
// server bounds them, far below net/http's 1 MiB default.
func TestLargeHeadersAreRefused(t *testing.T) {
	addr := serveWith(t, defaultLimits)
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 100<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d, want 431", resp.StatusCode)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("16 KiB of headers: %d, want 200", resp.StatusCode)
	}
}
