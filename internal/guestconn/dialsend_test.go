package guestconn_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A request sent with the dial reaches the server whole and first, and the
// server's answer comes back on the same stream: what a function's call
// relies on to save the round trip to the agent's dial answer. A dial that
// nothing accepts is ERefused (the request dropped with it).
func TestDialPortSendCarriesTheRequest(t *testing.T) {
	cl := session(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A port nothing listens on: take one, then close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if _, err := cl.DialPortSend(ctx, port, []byte("lost\n")); pandastack.ErrorCode(err) != pandastack.ERefused {
		t.Fatalf("dial with nothing listening: %v, want %s", err, pandastack.ERefused)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port = ln.Addr().(*net.TCPAddr).Port
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- line
		io.WriteString(c, "you said "+line)
	}()
	st, err := cl.DialPortSend(ctx, port, []byte(`{"event":{"name":"panda"}}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(15 * time.Second))
	answer, err := bufio.NewReader(st).ReadString('\n')
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	if line := <-got; line != `{"event":{"name":"panda"}}`+"\n" {
		t.Fatalf("the server read %q first", line)
	}
	if answer != `you said {"event":{"name":"panda"}}`+"\n" {
		t.Fatalf("answer %q", answer)
	}
}
