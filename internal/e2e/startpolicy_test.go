package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// dialerScript tries, in a tight loop, to connect to the outside world's
// address on port; it counts its tries in /tmp/tries. A template's START
// runs it, so it is running in the baked snapshot the instant a sandbox
// resumes.
const dialerScript = `import socket, time
n = 0
while True:
    n += 1
    try:
        socket.create_connection((%q, %d), timeout=0.5).close()
    except OSError:
        pass
    with open("/tmp/tries", "w") as f:
        f.write(str(n))
    time.sleep(0.01)
`

// A sandbox's network policy is in force before its guest runs a single
// instruction: a daemon already running in a template (its START) that
// dials out the moment the sandbox resumes never gets through a deny
// policy. The same template without a policy does get through, so the
// dialer really dials.
func TestPolicyInForceFromFirstInstruction(t *testing.T) {
	const port = 8125
	_, dir := writeContext(t, "", map[string]string{"dial.py": fmt.Sprintf(dialerScript, outside.ip.String(), port)})
	spec := fmt.Sprintf("FROM base\nCOPY dial.py /dial.py\nRUN echo %d > /built\nSTART python3 /dial.py\nREADY --timeout=120 test -s /tmp/tries\n", time.Now().UnixNano())
	name := fmt.Sprintf("dialer-%d", time.Now().UnixNano()%1_000_000)
	if _, _, err := buildCustom(t, name, spec, dir); err != nil {
		t.Fatalf("build: %v", err)
	}
	// Listen only now: the bake's own tries were refused.
	ln, err := listenIn(outside.ns, net.JoinHostPort("0.0.0.0", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	c := main.client(main.admin)
	tries := func(t *testing.T, sb *sdk.Sandbox) int {
		n, _ := strconv.Atoi(execOut(t, sb, "cat /tmp/tries"))
		return n
	}

	t.Run("a deny policy holds from the first try", func(t *testing.T) {
		// A few creates, the first with a volume (mounted before the
		// create answers, as a database's would be): before the fix the
		// policy landed only after that, while the dialer already ran.
		vol, err := c.CreateVolume(t.Context(), fmt.Sprintf("dialer-%d", time.Now().UnixNano()%1_000_000), 16)
		if err != nil {
			t.Fatal(err)
		}
		defer c.DeleteVolume(context.Background(), vol.ID)
		for i := range 3 {
			p := sdk.CreateSandboxParams{Template: name, Network: &sdk.NetworkPolicy{Egress: "deny"}}
			if i == 0 {
				p.Volumes = []sdk.VolumeMount{{Volume: vol.ID, Path: "/data"}}
			}
			sb := newSandbox(t, c, p)
			// Let the dialer try many times after the restore.
			start := tries(t, sb)
			eventually(t, 2*time.Minute, "the dialer to try 20 more times", func() bool { return tries(t, sb) >= start+20 })
			if n := accepted.Load(); n != 0 {
				t.Fatalf("a sandbox created with egress deny (create %d) connected out %d times", i+1, n)
			}
			if err := sb.Kill(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("without a policy the dialer gets through", func(t *testing.T) {
		newSandbox(t, c, sdk.CreateSandboxParams{Template: name})
		eventually(t, 2*time.Minute, "a connection from the sandbox without a policy", func() bool { return accepted.Load() > 0 })
	})
}
