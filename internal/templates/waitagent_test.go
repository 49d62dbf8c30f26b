package templates

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/guestproto"
	"github.com/pandastack/pandastack/internal/vmm"
)

// socketVM is a VM that is only an agent socket and a directory.
type socketVM struct {
	vmm.VM
	dir, sock string
	exited    chan struct{}
}

func (v socketVM) Dir() string             { return v.dir }
func (v socketVM) AgentSocket() string     { return v.sock }
func (v socketVM) Exited() <-chan struct{} { return v.exited }

// TestWaitAgentSendsHelloAgain: a connection whose Hello is never
// answered is dropped after helloAttempt, and the agent that answers on
// the next connection is found — a first lost Hello does not use up the
// whole boot wait.
func TestWaitAgentSendsHelloAgain(t *testing.T) {
	defer func(d time.Duration) { helloAttempt = d }(helloAttempt)
	helloAttempt = 200 * time.Millisecond
	dir := t.TempDir()
	v := socketVM{dir: dir, sock: filepath.Join(dir, "agent.sock"), exited: make(chan struct{})}
	ln, err := net.Listen("unix", v.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conns := make(chan int, 8)
	go func() {
		for n := 1; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- n
			go func(c net.Conn, n int) {
				defer c.Close()
				typ, p, _, err := guestproto.ReadFrame(c, nil)
				if err != nil || typ != guestproto.FrameHello || n == 1 {
					_, _ = c.Read(make([]byte, 1)) // the first Hello is lost: hold the connection, silent
					return
				}
				h, err := guestproto.UnmarshalHello(p)
				if err != nil {
					return
				}
				_ = guestproto.WriteFrame(c, guestproto.FrameHelloAck, guestproto.HelloAck{Session: h.Session}.MarshalBinary())
				_, _ = c.Read(make([]byte, 1))
			}(c, n)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := waitAgent(ctx, v)
	if err != nil {
		t.Fatalf("an agent that answers the second Hello: %v", err)
	}
	cl.Close()
	if got := len(conns); got != 2 {
		t.Fatalf("%d connections, want 2 (one silent, one answered)", got)
	}
}
