package guestconn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// FuzzHandshake answers the host's Hello with arbitrary bytes (stale
// frames, garbage, frames of any length) and hangs up: the handshake
// fails with an error that says it was waiting for the agent, and never
// takes a session the host did not start.
func FuzzHandshake(f *testing.F) {
	var b bytes.Buffer
	_ = guestproto.WriteFrame(&b, guestproto.FrameData, []byte("stale yamux bytes"))
	_ = guestproto.WriteFrame(&b, guestproto.FrameHelloAck, guestproto.HelloAck{Session: "0123456789abcdef", Version: "old", Sessions: 1}.MarshalBinary())
	f.Add(b.Bytes())
	f.Add([]byte{guestproto.FrameHelloAck, 0, 0, 0, 1, 200})
	f.Add([]byte{guestproto.FrameData, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, answer []byte) {
		host, guest := net.Pipe()
		go func() {
			defer guest.Close()
			if _, _, _, err := guestproto.ReadFrame(guest, nil); err != nil {
				return
			}
			_, _ = guest.Write(answer)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl, _, err := guestconn.NewConn(host).Handshake(ctx)
		if err == nil {
			cl.Close()
			t.Fatal("handshake accepted a session the host never started")
		}
		if ctx.Err() != nil {
			t.Fatal("handshake did not end when the guest hung up")
		}
		if !strings.Contains(err.Error(), "hello") {
			t.Fatalf("error %q does not say what failed", err)
		}
	})
}

// op is a host operation driven against a scripted guest.
type op func(ctx context.Context, cl *guestconn.Client) error

var ops = []struct {
	name string
	run  op
}{
	{"exec", func(ctx context.Context, cl *guestconn.Client) error {
		_, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "echo hi"}, nil, func(pandastack.ExecEvent) error { return nil })
		return err
	}},
	{"attach", func(ctx context.Context, cl *guestconn.Client) error {
		_, err := cl.Attach(ctx, 42, func(pandastack.ExecEvent) error { return nil })
		return err
	}},
	{"ps", func(ctx context.Context, cl *guestconn.Client) error { _, err := cl.Processes(ctx); return err }},
	{"read", func(ctx context.Context, cl *guestconn.Client) error {
		return cl.ReadFile(ctx, "/work/x", io.Discard, nil)
	}},
	{"write", func(ctx context.Context, cl *guestconn.Client) error {
		_, err := cl.WriteFile(ctx, "/work/x", 0o644, strings.NewReader("hello"))
		return err
	}},
	{"list", func(ctx context.Context, cl *guestconn.Client) error { _, err := cl.ListDir(ctx, "/"); return err }},
	{"stat", func(ctx context.Context, cl *guestconn.Client) error { _, err := cl.Stat(ctx, "/"); return err }},
	{"ping", func(ctx context.Context, cl *guestconn.Client) error { _, err := cl.Ping(ctx); return err }},
	{"dial", func(ctx context.Context, cl *guestconn.Client) error {
		c, err := cl.DialPort(ctx, 8080)
		if err == nil {
			c.Close()
		}
		return err
	}},
}

// pkts encodes packets for the seeds.
func pkts(ps ...any) []byte {
	var b bytes.Buffer
	c := guestproto.NewConn(&b)
	for i := 0; i+1 < len(ps); i += 2 {
		switch v := ps[i+1].(type) {
		case string:
			_ = c.Write(ps[i].(byte), []byte(v))
		default:
			j, _ := json.Marshal(v)
			_ = c.Write(ps[i].(byte), j)
		}
	}
	return b.Bytes()
}

// FuzzGuestAnswers lets a guest answer each host operation with arbitrary
// packets, then end the stream: the operation returns (it does not wait
// for more), and its error is a coded pandastack error — what a guest says
// reaches the API as a clear status, never an uncoded internal error.
func FuzzGuestAnswers(f *testing.F) {
	exec := pkts(guestproto.PktStarted, guestproto.Started{PID: 7}, guestproto.PktStdout, "hi\n",
		guestproto.PktExit, guestproto.Exit{ExitCode: 0, DurationMs: 1.5})
	for i := range ops {
		f.Add(byte(i), exec)
		f.Add(byte(i), pkts(guestproto.PktError, guestproto.Error{Code: guestproto.ErrNotFound, Message: "no such file"}))
		f.Add(byte(i), pkts(guestproto.PktOK, pandastack.FileInfo{Name: "x", Size: 5}, guestproto.PktData, "hello", guestproto.PktEOF, ""))
	}
	f.Add(byte(2), pkts(guestproto.PktOK, `[{"pid":1,"args":["/bin/sh","-c","sleep 1"],"started_at":"yesterday"}]`))
	f.Fuzz(func(t *testing.T, which byte, answer []byte) {
		o := ops[int(which)%len(ops)]
		cl := scriptedGuest(t, answer)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := o.run(ctx, cl)
		if ctx.Err() != nil {
			t.Fatalf("%s did not end when the guest ended the stream", o.name)
		}
		var pe *pandastack.Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("%s failed with an uncoded error: %v", o.name, err)
		}
	})
}

// scriptedGuest completes the handshake like the agent, then answers the
// first stream the host opens with answer and closes it.
func scriptedGuest(t *testing.T, answer []byte) *guestconn.Client {
	t.Helper()
	host, guest := net.Pipe()
	go func() {
		defer guest.Close()
		_, p, _, err := guestproto.ReadFrame(guest, nil)
		if err != nil {
			return
		}
		h, err := guestproto.UnmarshalHello(p)
		if err != nil {
			return
		}
		ack := guestproto.HelloAck{Session: h.Session, Sessions: 1, Version: "scripted"}
		if guestproto.WriteFrame(guest, guestproto.FrameHelloAck, ack.MarshalBinary()) != nil {
			return
		}
		cfg := yamux.DefaultConfig()
		cfg.LogOutput = io.Discard
		cfg.EnableKeepAlive = false
		mux, err := yamux.Server(&frames{nc: guest}, cfg)
		if err != nil {
			return
		}
		defer mux.Close()
		st, err := mux.AcceptStream()
		if err != nil {
			return
		}
		defer st.Close()
		if _, _, err := guestproto.NewConn(st).Read(); err != nil {
			return
		}
		_, _ = st.Write(answer)
		_ = st.Close() // half-close: the host reads the end of the answer
		// Drain what the host still sends (upload bytes) until it closes.
		_, _ = io.Copy(io.Discard, io.LimitReader(st, 1<<20))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _, err := guestconn.NewConn(host).Handshake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
