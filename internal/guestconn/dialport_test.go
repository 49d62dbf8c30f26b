package guestconn_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// A server in the sandbox that ends its answer by closing the connection
// (HTTP/1.0, a response without Content-Length, many line protocols) ends
// the host's side of the stream too: the host reads its last byte and then
// EOF, while its own side is still open for writing.
func TestDialPortPassesTheServersCloseOn(t *testing.T) {
	cl := session(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\nyou said "+line)
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := cl.DialPort(ctx, ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := io.WriteString(st, "GET / HTTP/1.0\n"); err != nil {
		t.Fatal(err)
	}
	// The host keeps its side open. Without the close passed on, this read
	// never ends; the deadline turns that into a failure.
	st.SetDeadline(time.Now().Add(15 * time.Second))
	got, err := io.ReadAll(st)
	if err != nil {
		t.Fatalf("read to the server's close: %v (got %q)", err, got)
	}
	if want := "HTTP/1.0 200 OK\r\n\r\nyou said GET / HTTP/1.0\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
