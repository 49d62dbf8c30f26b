package functions

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// helloShim stands in for a shim on the direct port, answering a call
// with the hello's part as the shim of its kind does: "seeded" (it did
// the part and ran the call), "old" (a shim from before: the line is not
// JSON to it) or "unprivileged" (it could not do the part). It records the
// lines it read and, per line, whether the agent's session had begun.
type helloShim struct {
	pandastack.Guest
	kind    string
	lines   []string
	pings   int
	begunAt []int // pings seen when each line was read
}

func (g *helloShim) Ping(context.Context) (time.Duration, error) {
	g.pings++
	return time.Millisecond, nil
}

func (g *helloShim) DialDirect(context.Context) (net.Conn, error) {
	host, guest := net.Pipe()
	go func() {
		defer guest.Close()
		r := bufio.NewReader(guest)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			g.lines = append(g.lines, line)
			g.begunAt = append(g.begunAt, g.pings)
			answer := `{"ok":true,"result":{"hello":"world"},"logs":""}`
			if strings.HasPrefix(line, helloPrefix) {
				switch g.kind {
				case "seeded":
					answer = `{"ok":true,"result":{"hello":"world"},"logs":"","seeded":true}`
				case "old":
					answer = `{"ok":false,"error":{"type":"JSONDecodeError","message":"Expecting value: line 1 column 1 (char 0)","stack":""},"logs":""}`
				case "unprivileged":
					answer = `{"ok":false,"seeded":false,"error":{"type":"PermissionError","message":"the shim could not do the hello's part","stack":""},"logs":""}`
				}
			}
			guest.Write([]byte(answer + "\n"))
		}
	}()
	return host, nil
}

// A fresh Python call goes with the hello's part (a seed, the host's
// time) in one line; a shim that did not do it (an old one, or one
// without the privileges) gets the agent's session begun and the call
// sent again, once.
func TestCallWithHello(t *testing.T) {
	for _, kind := range []string{"seeded", "old", "unprivileged"} {
		t.Run(kind, func(t *testing.T) {
			g := &helloShim{kind: kind}
			before := time.Now().UnixNano()
			reply, err := call(t.Context(), guestEngine{g: g}, "sbx_1", callMode{fresh: true, selfHello: true},
				[]byte(`{"a":1}`), startPhases(), map[string]any{"invocation_id": "inv_1"})
			if err != nil || !reply.OK || !strings.Contains(string(reply.Result), "world") {
				t.Fatalf("call: %+v, %v", reply, err)
			}
			if !strings.HasPrefix(g.lines[0], helloPrefix) {
				t.Fatalf("first line %q: want the hello's prefix", g.lines[0])
			}
			var h struct {
				Event   map[string]int    `json:"event"`
				Context map[string]string `json:"context"`
				Seed    string            `json:"seed"`
				Gen     string            `json:"generation"`
				NowNs   int64             `json:"now_ns"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(g.lines[0], helloPrefix)), &h); err != nil {
				t.Fatalf("hello line %q: %v", g.lines[0], err)
			}
			if seed, err := hex.DecodeString(h.Seed); err != nil || len(seed) != 64 {
				t.Fatalf("hello seed %q: want 64 bytes in hex", h.Seed)
			}
			if gen, err := hex.DecodeString(h.Gen); err != nil || len(gen) != 16 {
				t.Fatalf("hello generation token %q: want 16 bytes in hex (the agent's format)", h.Gen)
			}
			if h.Event["a"] != 1 || h.Context["invocation_id"] != "inv_1" || h.NowNs < before || h.NowNs > time.Now().UnixNano() {
				t.Fatalf("hello line %q: want the event, the context and the host's time", g.lines[0])
			}
			if kind == "seeded" {
				if len(g.lines) != 1 || g.pings != 0 {
					t.Fatalf("%d lines sent, the session begun %d times; want the one line and no session", len(g.lines), g.pings)
				}
				return
			}
			if len(g.lines) != 2 || g.pings != 1 || g.begunAt[1] != 1 || strings.HasPrefix(g.lines[1], helloPrefix) {
				t.Fatalf("lines %q, session begun %d times (before line 2: %v); want the call again as usual after the session began",
					g.lines, g.pings, g.begunAt)
			}
		})
	}
}

// Two calls with the hello's part carry different seeds.
func TestHelloSeedsDiffer(t *testing.T) {
	seeds := map[string]bool{}
	for range 2 {
		g := &helloShim{kind: "seeded"}
		if _, err := call(t.Context(), guestEngine{g: g}, "sbx_1", callMode{fresh: true, selfHello: true}, []byte(`{}`), startPhases(), nil); err != nil {
			t.Fatal(err)
		}
		var h struct{ Seed string }
		_ = json.Unmarshal([]byte(strings.TrimPrefix(g.lines[0], helloPrefix)), &h)
		seeds[h.Seed] = true
	}
	if len(seeds) != 2 {
		t.Fatalf("seeds %v: want two different", seeds)
	}
}

// Python's shim does the hello's part; Node's only with the addon; a
// snapshot whose shim could not is not asked again.
func TestShimHellos(t *testing.T) {
	py := Version{Runtime: RuntimePython, SnapshotID: "snap_py"}
	node := Version{Runtime: RuntimeNode, SnapshotID: "snap_node"}
	without, with := New(Config{}), New(Config{NodeHelloAddon: []byte("addon")})
	if !without.shimHellos(py) || without.shimHellos(node) {
		t.Fatal("without the addon: want Python's shim asked, Node's not")
	}
	if !with.shimHellos(py) || !with.shimHellos(node) {
		t.Fatal("with the addon: want both shims asked")
	}
	if by := with.noteHello(node, true, shimReply{OK: true, Seeded: true}, nil); by != "shim" || !with.shimHellos(node) {
		t.Fatalf("a seeded reply: greeted by %q, asked again %v; want the shim, and asked again", by, with.shimHellos(node))
	}
	if by := with.noteHello(node, true, shimReply{}, errors.New("timeout")); by != "agent" || !with.shimHellos(node) {
		t.Fatal("a failed call says nothing of the shim: it is asked again")
	}
	if by := with.noteHello(node, true, shimReply{OK: true}, nil); by != "agent" || with.shimHellos(node) {
		t.Fatalf("a shim that could not: greeted by %q; want the agent, and that snapshot's shim not asked again", by)
	}
	if !with.shimHellos(Version{Runtime: RuntimeNode, SnapshotID: "snap_node2"}) {
		t.Fatal("another snapshot's shim is still asked")
	}
}
