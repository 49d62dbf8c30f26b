package guestconn_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guest/guesttest"
	"github.com/pandastack/pandastack/internal/guestconn"
)

// countingConn counts the bytes the host writes to the agent.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.written.Add(int64(len(p)))
	return c.Conn.Write(p)
}

// A deferred session sends nothing to the agent until its first
// operation, which begins it (the hello answered, begun called once) even
// when several operations start at once; every operation then works.
func TestDeferredSessionBeginsAtFirstUse(t *testing.T) {
	nc := &countingConn{Conn: guesttest.Serve(t)}
	var begun atomic.Int32
	cl := guestconn.NewConn(nc).Deferred(10*time.Second, func() { begun.Add(1) })
	t.Cleanup(func() { cl.Close() })
	time.Sleep(100 * time.Millisecond)
	if n := nc.written.Load(); n != 0 || begun.Load() != 0 {
		t.Fatalf("before any operation: %d bytes sent, begun %d times; want none", n, begun.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out collected
			res, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "echo deferred"}, nil, out.fn)
			if err == nil && (res.ExitCode != 0 || out.stdout.String() != "deferred\n") {
				t.Errorf("exec %d: exit %d, stdout %q", i, res.ExitCode, out.stdout.String())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
	}
	if n := begun.Load(); n != 1 {
		t.Fatalf("begun called %d times; want once", n)
	}
	if nc.written.Load() == 0 {
		t.Fatal("nothing was sent to the agent")
	}
}

// A deferred session closed before its first use never greets the agent,
// and an operation after the close fails as unavailable.
func TestDeferredSessionClosedUnused(t *testing.T) {
	nc := &countingConn{Conn: guesttest.Serve(t)}
	cl := guestconn.NewConn(nc).Deferred(10*time.Second, nil)
	cl.Close()
	select {
	case <-cl.Done():
	default:
		t.Fatal("Done is open after Close")
	}
	_, err := cl.Stat(context.Background(), "/")
	if pandastack.ErrorCode(err) != pandastack.EUnavailable {
		t.Fatalf("stat after close: %v; want unavailable", err)
	}
	if n := nc.written.Load(); n != 0 {
		t.Fatalf("%d bytes sent to the agent; want none", n)
	}
}
