package nicroute_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/nicroute"
)

// The NIC and the guest agent here are stand-ins (no VM in a unit test):
// each is a real TCP server on the loopback that names the path it
// serves, so a test reads which path a connection really took. The real
// NIC path, through a VM's namespace, is exercised in internal/e2e
// (TestDatabaseTrafficOverNIC).

// serve starts a loopback server that writes name to every connection.
func serve(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, name)
			c.Close()
		}
	}()
	return l.Addr().String()
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// events records the order of wakes and dials.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, s)
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprint(e.log)
}

// fakeGuests wakes (records) and gives a guest whose DialPort is the
// agent path's stand-in.
type fakeGuests struct {
	ev    *events
	agent string // address of the agent path's server
	err   error  // the wake's answer
}

func (g *fakeGuests) Guest(_ context.Context, id string) (pandastack.Guest, error) {
	g.ev.add("wake " + id)
	if g.err != nil {
		return nil, g.err
	}
	return fakeGuest{g: g}, nil
}

type fakeGuest struct {
	pandastack.Guest // only DialPort is used
	g                *fakeGuests
}

func (f fakeGuest) DialPort(ctx context.Context, port int) (net.Conn, error) {
	f.g.ev.add(fmt.Sprintf("agent %d", port))
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.g.agent)
}

// fakeNIC dials the address it holds for a VM; a VM it has none for is
// network.ErrNoNIC, as *network.Manager answers.
type fakeNIC struct {
	ev    *events
	addrs map[string]string
	block bool // wait for the caller to give up
}

func (n *fakeNIC) DialGuest(ctx context.Context, id string, port int) (net.Conn, error) {
	n.ev.add(fmt.Sprintf("nic %d", port))
	if n.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	a, ok := n.addrs[id]
	if !ok {
		return nil, fmt.Errorf("dial: %w", network.ErrNoNIC)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", a)
}

func read(t *testing.T, c net.Conn) string {
	t.Helper()
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPathChoice: a sandbox with a NIC on this host is reached over it,
// after the wake; the agent carries a connection only when there is no
// NIC path (no networking, no namespace here, a port open on loopback
// only), and the path taken is the one counted.
func TestPathChoice(t *testing.T) {
	agent, nic := serve(t, "agent"), serve(t, "nic")
	cases := []struct {
		name  string
		nic   map[string]string // nil: no NIC dialer at all
		want  nicroute.Path
		trace string
	}{
		{"over the NIC", map[string]string{"sb1": nic}, nicroute.PathNIC, "[wake sb1 nic 5432]"},
		{"no networking on the server", nil, nicroute.PathAgent, "[wake sb1 agent 5432]"},
		{"no namespace on this host", map[string]string{"other": nic}, nicroute.PathAgent, "[wake sb1 nic 5432 agent 5432]"},
		{"listens on loopback only", map[string]string{"sb1": closedPort(t)}, nicroute.PathAgent, "[wake sb1 nic 5432 agent 5432]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := &events{}
			d := &nicroute.Dialer{Guests: &fakeGuests{ev: ev, agent: agent}}
			if c.nic != nil {
				d.NIC = &fakeNIC{ev: ev, addrs: c.nic}
			}
			conn, path, err := d.Dial(context.Background(), "sb1", 5432)
			if err != nil {
				t.Fatal(err)
			}
			if got := read(t, conn); got != string(c.want) || path != c.want {
				t.Fatalf("connection reached %q (path %q), want %q", got, path, c.want)
			}
			if ev.String() != c.trace {
				t.Fatalf("steps %s, want %s", ev, c.trace)
			}
			n, a := d.Counts()
			if (c.want == nicroute.PathNIC) != (n == 1 && a == 0) || (c.want == nicroute.PathAgent) != (a == 1 && n == 0) {
				t.Fatalf("counts nic %d agent %d after one %s connection", n, a, c.want)
			}
			// The router's backend takes the same path.
			conn, err = d.Port("sb1", 5432).Dial(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := read(t, conn); got != string(c.want) {
				t.Fatalf("backend reached %q, want %q", got, c.want)
			}
		})
	}
}

// TestWakeFailureDialsNothing: a sandbox that cannot be woken (gone) is
// the wake's error, and neither path is tried.
func TestWakeFailureDialsNothing(t *testing.T) {
	ev := &events{}
	gone := pandastack.Errorf(pandastack.ENotFound, "sandbox sb1 not found")
	d := &nicroute.Dialer{Guests: &fakeGuests{ev: ev, err: gone}, NIC: &fakeNIC{ev: ev, addrs: map[string]string{"sb1": serve(t, "nic")}}}
	if _, err := d.Port("sb1", 5432).Dial(context.Background()); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("dial of a gone sandbox: %v, want not found", err)
	}
	if ev.String() != "[wake sb1]" {
		t.Fatalf("steps %s, want only the wake", ev)
	}
}

// TestCallerGivesUp: a caller that gives up while the NIC dial waits gets
// its own error; the agent is not tried behind its back.
func TestCallerGivesUp(t *testing.T) {
	ev := &events{}
	d := &nicroute.Dialer{Guests: &fakeGuests{ev: ev, agent: serve(t, "agent")}, NIC: &fakeNIC{ev: ev, block: true}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := d.Dial(ctx, "sb1", 5432); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial after the caller gave up: %v, want context.Canceled", err)
	}
	if ev.String() != "[wake sb1 nic 5432]" {
		t.Fatalf("steps %s, want no agent dial", ev)
	}
}
