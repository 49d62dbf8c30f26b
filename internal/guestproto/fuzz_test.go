package guestproto_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// frame builds one frame as WriteFrame would.
func frame(typ byte, payload []byte) []byte {
	var b bytes.Buffer
	if err := guestproto.WriteFrame(&b, typ, payload); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// packet builds one packet as Conn.Write would.
func packet(typ byte, payload []byte) []byte {
	var b bytes.Buffer
	if err := guestproto.NewConn(&b).Write(typ, payload); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// FuzzReadFrame reads a port's byte stream as both ends do (the host from
// a possibly hostile guest, the guest agent from the host): every frame it
// accepts re-encodes to exactly the bytes it consumed, no frame's buffer
// grows past MaxFrame whatever the length field claims, and a stream that
// stops mid-frame is an error, not a short frame.
func FuzzReadFrame(f *testing.F) {
	hello := guestproto.Hello{Session: "0011223344556677", UnixNanos: 1700000000e9, Seed: bytes.Repeat([]byte{7}, 64)}
	f.Add(frame(guestproto.FrameHello, hello.MarshalBinary()))
	ack := guestproto.HelloAck{Session: "0011223344556677", Version: "dev", BootID: "b", Sessions: 2}
	f.Add(append(frame(guestproto.FrameHelloAck, ack.MarshalBinary()), frame(guestproto.FrameData, []byte("yamux"))...))
	f.Add([]byte{guestproto.FrameData, 0xff, 0xff, 0xff, 0xff}) // a length of 4 GiB
	f.Add([]byte{guestproto.FrameData, 0, 0x10, 0, 1})          // MaxFrame+1
	f.Add([]byte{guestproto.FrameData, 0, 0, 0, 9, 'a'})        // ends mid-payload
	f.Add([]byte{9, 0, 0})                                      // ends mid-header
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		var buf []byte
		for {
			before := len(stream) - r.Len()
			typ, p, b, err := guestproto.ReadFrame(r, buf)
			buf = b
			if cap(buf) > guestproto.MaxFrame {
				t.Fatalf("frame buffer grew to %d bytes, past MaxFrame", cap(buf))
			}
			if err != nil {
				if errors.Is(err, io.EOF) && before != len(stream) {
					t.Fatalf("a stream ending mid-frame read as a clean end of stream")
				}
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					if n := binary.BigEndian.Uint32(stream[before+1 : before+5]); n <= guestproto.MaxFrame {
						t.Fatalf("frame of %d bytes (within MaxFrame) refused: %v", n, err)
					}
				}
				return
			}
			consumed := stream[before : len(stream)-r.Len()]
			if got := frame(typ, p); !bytes.Equal(got, consumed) {
				t.Fatalf("frame re-encodes to %x, read from %x", got, consumed)
			}
		}
	})
}

// FuzzHello decodes the Hello frame payload the guest agent receives (and
// the HelloAck the host receives): a decoded value encodes and decodes
// back to itself, and a short payload is an error.
func FuzzHello(f *testing.F) {
	f.Add(guestproto.Hello{Session: "0011223344556677", UnixNanos: -1, Seed: bytes.Repeat([]byte{1}, 64)}.MarshalBinary())
	f.Add(guestproto.HelloAck{Session: "s", Version: "v0.1", BootID: "boot", Sessions: 3}.MarshalBinary())
	f.Add([]byte{})
	f.Add([]byte{200, 'a'})
	f.Fuzz(func(t *testing.T, p []byte) {
		if h, err := guestproto.UnmarshalHello(p); err == nil {
			h2, err := guestproto.UnmarshalHello(h.MarshalBinary())
			if err != nil {
				t.Fatalf("re-encoded hello does not decode: %v", err)
			}
			if h2.Session != h.Session || h2.UnixNanos != h.UnixNanos || !bytes.Equal(h2.Seed, h.Seed) {
				t.Fatalf("hello round trip: %+v != %+v", h2, h)
			}
		} else if wellFormedHello(p) {
			t.Fatalf("well-formed hello %x refused: %v", p, err)
		}
		if a, err := guestproto.UnmarshalHelloAck(p); err == nil {
			a2, err := guestproto.UnmarshalHelloAck(a.MarshalBinary())
			if err != nil {
				t.Fatalf("re-encoded hello ack does not decode: %v", err)
			}
			if a2 != a {
				t.Fatalf("hello ack round trip: %+v != %+v", a2, a)
			}
		}
	})
}

// wellFormedHello reports whether p holds a session string, 8 clock bytes
// and a seed string, each string a length byte and that many bytes.
func wellFormedHello(p []byte) bool {
	if len(p) < 1 || len(p) < 1+int(p[0])+8+1 {
		return false
	}
	seed := p[1+int(p[0])+8:]
	return len(seed) >= 1+int(seed[0])
}

// FuzzConnRead reads a stream's packets as the guest agent reads the
// host's requests (and the host the guest's answers): a packet's buffer
// stays within MaxPacket, every accepted packet re-encodes to the bytes
// consumed, and a Request that decodes encodes and decodes to itself.
func FuzzConnRead(f *testing.F) {
	req := func(r guestproto.Request) []byte {
		b, _ := json.Marshal(r)
		return packet(guestproto.PktRequest, b)
	}
	f.Add(req(guestproto.Request{Op: guestproto.OpExec, Shell: "echo hi", Env: map[string]string{"A": "1"}, Cwd: "/work", TimeoutMs: 30000, Stdin: true}))
	f.Add(append(req(guestproto.Request{Op: guestproto.OpWrite, Path: "/tmp/x", Mode: 0o644}),
		append(packet(guestproto.PktData, []byte("hello")), packet(guestproto.PktEOF, nil)...)...))
	f.Add(req(guestproto.Request{Op: guestproto.OpSignal, PID: 42, Signal: "SIGTERM"}))
	f.Add(packet(guestproto.PktError, []byte(`{"code":"not_found","message":"no such file"}`)))
	f.Add([]byte{guestproto.PktData, 0x00, 0x40, 0x00, 0x01}) // MaxPacket+1
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		c := guestproto.NewConn(struct {
			io.Reader
			io.Writer
		}{r, io.Discard})
		before := 0
		for first := true; ; first = false {
			typ, p, err := c.Read()
			if err != nil {
				if errors.Is(err, io.EOF) && before != len(stream) {
					t.Fatalf("a stream ending mid-packet read as a clean end of stream")
				}
				return
			}
			if len(p) > guestproto.MaxPacket {
				t.Fatalf("packet of %d bytes accepted", len(p))
			}
			consumed := stream[before : len(stream)-r.Len()]
			before = len(stream) - r.Len()
			if got := packet(typ, p); !bytes.Equal(got, consumed) {
				t.Fatalf("packet re-encodes to %x, read from %x", got, consumed)
			}
			if !first || typ != guestproto.PktRequest {
				continue
			}
			// The agent's first read: c.ReadJSON(PktRequest, &req).
			var rq guestproto.Request
			if json.Unmarshal(p, &rq) != nil {
				continue
			}
			b, err := json.Marshal(rq)
			if err != nil {
				t.Fatalf("decoded request does not encode: %v", err)
			}
			var rq2 guestproto.Request
			if err := json.Unmarshal(b, &rq2); err != nil {
				t.Fatalf("re-encoded request does not decode: %v", err)
			}
			if !reflect.DeepEqual(normalizeRequest(rq), normalizeRequest(rq2)) {
				t.Fatalf("request round trip: %+v != %+v", rq2, rq)
			}
		}
	})
}

// normalizeRequest maps empty collections to nil: omitempty drops them.
func normalizeRequest(r guestproto.Request) guestproto.Request {
	if len(r.Args) == 0 {
		r.Args = nil
	}
	if len(r.Env) == 0 {
		r.Env = nil
	}
	return r
}

// FuzzReadJSON is the guest's answer as the host decodes it: a PktError
// payload becomes a *guestproto.Error, the wanted type decodes or fails
// with an error, and any other type is refused.
func FuzzReadJSON(f *testing.F) {
	f.Add(packet(guestproto.PktOK, []byte(`{"name":"x","size":3,"mode":420}`)))
	f.Add(packet(guestproto.PktError, []byte(`{"code":"permission_denied","message":"no"}`)))
	f.Add(packet(guestproto.PktError, []byte(`not json`)))
	f.Add(packet(guestproto.PktExit, []byte(`{"exit_code":1}`)))
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := guestproto.NewConn(struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(stream), io.Discard})
		var out map[string]any
		err := c.ReadJSON(guestproto.PktOK, &out)
		if len(stream) < 5 || err == nil {
			return
		}
		var ge *guestproto.Error
		if stream[0] == guestproto.PktError && errors.As(err, &ge) {
			// The header's length bounds the payload; bytes after it
			// belong to the next packet, which ReadJSON never reads.
			n := int(binary.BigEndian.Uint32(stream[1:5]))
			if n > len(stream)-5 {
				t.Fatalf("guest error %+v decoded from a truncated packet", *ge)
			}
			p := stream[5 : 5+n]
			var want guestproto.Error
			if json.Unmarshal(p, &want) != nil || *ge != want {
				t.Fatalf("guest error %+v from payload %q", *ge, p)
			}
		}
		if stream[0] != guestproto.PktOK && stream[0] != guestproto.PktError && int(binary.BigEndian.Uint32(stream[1:5])) <= len(stream)-5 && err.Error() == "" {
			t.Fatal("unexpected packet type refused without a message")
		}
	})
}
