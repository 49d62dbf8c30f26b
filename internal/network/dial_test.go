package network

import (
	"net"
	"testing"
	"time"
)

// TestConnsEndWithTheVM: the connections DialGuest made are closed when
// their VM's namespace is torn down (a dead guest sends no FIN: without
// this a client would wait for TCP's retries to give up), a connection
// closed first is forgotten, and none is added once the teardown began.
func TestConnsEndWithTheVM(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open: the peer never ends it
		}
	}()
	dial := func() *net.TCPConn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c.(*net.TCPConn)
	}
	n := &sandboxNet{ID: "vm1"}
	open, closed := &nicConn{TCPConn: dial(), n: n}, &nicConn{TCPConn: dial(), n: n}
	if !n.addConn(open) || !n.addConn(closed) {
		t.Fatal("a live namespace refused a connection")
	}
	closed.Close()
	if len(n.conns) != 1 {
		t.Fatalf("%d connections recorded after one closed, want 1", len(n.conns))
	}
	n.endConns()
	open.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read on a connection to an ended VM: %v, want it closed", err)
	}
	late := &nicConn{TCPConn: dial(), n: n}
	defer late.TCPConn.Close()
	if n.addConn(late) {
		t.Fatal("a connection was recorded after the VM's namespace was torn down")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
