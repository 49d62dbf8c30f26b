package router_test

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/router"
)

// A client over its connection cap is hung up on at once; a slot freed by
// a close is usable again.
func TestLimitPerClient(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := router.LimitPerClient(tcp, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	a, b := dial(), dial()
	defer a.Close()
	defer b.Close()
	sa, sb := <-accepted, <-accepted
	over := dial()
	defer over.Close()
	if n, err := over.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("third connection: read %d, %v; want it closed", n, err)
	}
	sa.Close()
	next := dial()
	defer next.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(20 * time.Second):
		t.Fatal("a freed slot was not reused")
	}
	sb.Close()
	if router.LimitPerClient(tcp, 0) != tcp {
		t.Error("a cap of 0 must leave the listener alone")
	}
}

func TestTableLookup(t *testing.T) {
	tb := router.NewTable()
	b := router.Addr{Network: "tcp", Address: "127.0.0.1:1"}
	if err := tb.Register(router.Route{Host: "A.Example.com.", Backend: b}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"a.example.com", "A.EXAMPLE.COM:443", "a.example.com."} {
		if r, ok := tb.Lookup(h); !ok || r.Host != "a.example.com" {
			t.Errorf("Lookup(%q) = %+v, %v", h, r, ok)
		}
	}
	if _, ok := tb.Lookup("b.example.com"); ok {
		t.Error("found an unregistered host")
	}
	if err := tb.Register(router.Route{Host: "", Backend: b}); err == nil {
		t.Error("registered a route without a host")
	}
	if err := tb.Register(router.Route{Host: "c.example.com"}); err == nil {
		t.Error("registered a route without a backend")
	}
	tb.Unregister("A.example.com")
	if _, ok := tb.Lookup("a.example.com"); ok {
		t.Error("still routed after Unregister")
	}
	var none *router.Table
	if _, ok := none.Lookup("a"); ok {
		t.Error("a nil table routes nothing")
	}
}
