package functions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// A VM restored from a function's snapshot starts with the snapshot's
// kernel RNG and clock. Before anything of a user's runs in it, the guest
// agent's hello mixes a seed from the host into the kernel's RNG, makes
// it reseed, and steps the clock. Under TCG that hello costs a fresh
// invocation ~80 ms: the first run, in a new QEMU process, of the guest's
// code to wake the agent (a Go runtime), read the hello and answer.
//
// A fresh invocation does that part in the shim instead, which is
// already awake to read the call: the host sends the call as one line
// prefixed "hello " with the seed and its time, on the VM's direct port,
// and the VM's agent session is deferred (sandboxes.CreateParams
// .DeferSession). The shim (shim.py and shim.mjs, hello) mixes the seed in with
// RNDADDENTROPY, reseeds with RNDRESEEDCRNG, sets the clock, writes the
// host's new token to the agent's generation file (guest.GenerationFile)
// and runs the call, its reply marked "seeded". Anything else is the call not run: a
// shim baked before this (it answers the line as bad JSON), or one that
// lacks the privileges (a template whose user is not root). Then the
// host begins the agent's session — the agent's hello does it — and
// sends the call again as usual.
//
// Python's shim has the calls it needs (fcntl.ioctl, clock_settime).
// Node has neither: its shim does the part through a Node-API addon of
// ours (shim/hello.c, Config.NodeHelloAddon); a server without the
// addon leaves Node VMs to the agent's hello (Service.shimHellos).

// helloPrefix starts a call line that carries the hello's part.
const helloPrefix = "hello "

// helloCall sends the call with a hello on the direct port conn and reads
// the reply: Seeded false means the call did not run.
func helloCall(ctx context.Context, conn net.Conn, event []byte, fnctx map[string]any) (shimReply, error) {
	seed, gen := make([]byte, 64), make([]byte, 16)
	_, _ = rand.Read(seed)
	_, _ = rand.Read(gen)
	line, err := json.Marshal(map[string]any{"event": json.RawMessage(event), "context": fnctx,
		"seed": hex.EncodeToString(seed), "generation": hex.EncodeToString(gen), "now_ns": time.Now().UnixNano()})
	if err != nil {
		return shimReply{}, err
	}
	line = append(append([]byte(helloPrefix), line...), '\n')
	if _, err := conn.Write(line); err != nil {
		return shimReply{}, deadlineErr(ctx, fmt.Errorf("send the event: %w", err))
	}
	return readReply(ctx, conn)
}
