package qemu_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// directConn is the qemu driver's VM's way to its direct port.
type directConn interface {
	DirectConn(ctx context.Context) (net.Conn, error)
}

// echoDirect is run in the guest: it opens the direct port (found by its
// name), says so in /tmp/direct-open, and answers one line with
// "got:LINE".
const echoDirect = `for d in /sys/class/virtio-ports/*; do [ "$(cat $d/name)" = pandastack.direct ] && p=/dev/${d##*/}; done
exec 3<>"$p"; echo open > /tmp/direct-open; read -r line <&3; echo "got:$line" >&3; sleep 5`

// A baked machine has a direct port: a guest process that opens it and
// the host talk over it, with no agent between.
func TestDirectPortReachesTheGuestProcess(t *testing.T) {
	s := template(t)
	if !s.Machine.DirectPort {
		t.Fatal("the baked template's machine has no direct port")
	}
	d := newDriver(t, vmDir(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := d.Restore(ctx, s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	hasMachine(t, v, s.Machine)
	cl := agent(t, v)
	if _, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: echoDirect, User: "root", Background: true}, nil, func(pandastack.ExecEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := guestShUntil(t, cl, "cat /tmp/direct-open 2>/dev/null", "open"); got != "open\n" {
		t.Fatalf("the guest did not open its direct port: %q", got)
	}
	conn, err := v.(directConn).DirectConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || line != "got:ping\n" {
		t.Fatalf("the guest answered %q, %v; want got:ping", line, err)
	}
}
