package functions

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// directGuest answers like the shim on its direct port (unless noPort:
// a machine without one) and through the agent (DialPort), and counts
// which way each call came; it keeps the last request line.
type directGuest struct {
	pandastack.Guest
	noPort          bool
	direct, viaPort int
	line            string
}

func (g *directGuest) answer() net.Conn {
	host, guest := net.Pipe()
	go func() {
		defer guest.Close()
		line, err := bufio.NewReader(guest).ReadString('\n')
		if err != nil {
			return
		}
		g.line = line
		guest.Write([]byte(`{"ok":true,"result":{"hello":"world"},"logs":""}` + "\n"))
	}()
	return host
}

func (g *directGuest) DialDirect(context.Context) (net.Conn, error) {
	if g.noPort {
		return nil, errors.ErrUnsupported
	}
	g.direct++
	return g.answer(), nil
}

func (g *directGuest) DialPort(context.Context, int) (net.Conn, error) {
	g.viaPort++
	return g.answer(), nil
}

type guestEngine struct {
	pandastack.Engine
	g pandastack.Guest
}

func (e guestEngine) Guest(context.Context, string) (pandastack.Guest, error) { return e.g, nil }

// A fresh invocation calls the shim on its VM's direct port, with the
// host's time for the shim's clock check; a warm VM's call, and a call in
// a VM whose machine has no direct port, go through the agent.
func TestCallTakesTheDirectPortWhenFresh(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fresh, noPort bool
		direct, port  int
	}{
		{"fresh", true, false, 1, 0},
		{"warm", false, false, 0, 1},
		{"fresh, no direct port", true, true, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &directGuest{noPort: tc.noPort}
			before := time.Now().UnixMilli()
			reply, err := call(t.Context(), guestEngine{g: g}, "sbx_1", callMode{fresh: tc.fresh}, []byte(`{"a":1}`), startPhases(), map[string]any{"invocation_id": "inv_1"})
			if err != nil || !reply.OK || !strings.Contains(string(reply.Result), "world") {
				t.Fatalf("call: %+v, %v", reply, err)
			}
			if g.direct != tc.direct || g.viaPort != tc.port {
				t.Fatalf("calls on the direct port %d, through the agent %d; want %d and %d", g.direct, g.viaPort, tc.direct, tc.port)
			}
			var req struct {
				Event   map[string]int    `json:"event"`
				Context map[string]string `json:"context"`
				NowMs   int64             `json:"now_ms"`
			}
			if err := json.Unmarshal([]byte(g.line), &req); err != nil {
				t.Fatalf("request line %q: %v", g.line, err)
			}
			if req.Event["a"] != 1 || req.Context["invocation_id"] != "inv_1" || req.NowMs < before || req.NowMs > time.Now().UnixMilli() {
				t.Fatalf("request line %q: want the event, the context and the host's time", g.line)
			}
		})
	}
}
