package guestconn_test

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// frames carries yamux bytes in guestproto data frames: the guest's side
// of the transport, as the real agent speaks it.
type frames struct {
	nc   net.Conn
	buf  []byte
	rest []byte
	wmu  sync.Mutex
}

func (f *frames) Read(p []byte) (int, error) {
	for len(f.rest) == 0 {
		typ, payload, buf, err := guestproto.ReadFrame(f.nc, f.buf)
		f.buf = buf
		if err != nil {
			return 0, err
		}
		if typ == guestproto.FrameData {
			f.rest = payload
		}
	}
	n := copy(p, f.rest)
	f.rest = f.rest[n:]
	return n, nil
}

func (f *frames) Write(p []byte) (int, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	for off := 0; off < len(p); off += 64 << 10 {
		if err := guestproto.WriteFrame(f.nc, guestproto.FrameData, p[off:min(len(p), off+64<<10)]); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

func (f *frames) Close() error { return f.nc.Close() }

// hostileGuest answers the host's Hello like the agent, then opens streams
// of its own — which the protocol does not have — and fills each one's
// receive window. It returns the host's session and how many bytes the
// guest managed to push.
func hostileGuest(t *testing.T, streams, perStream int) (*guestconn.Client, func() int64) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "port.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := guestconn.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	var pushed int64
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		typ, p, _, err := guestproto.ReadFrame(nc, nil)
		if err != nil || typ != guestproto.FrameHello {
			return
		}
		h, err := guestproto.UnmarshalHello(p)
		if err != nil {
			return
		}
		ack := guestproto.HelloAck{Session: h.Session, Sessions: 1, Version: "hostile"}
		if guestproto.WriteFrame(nc, guestproto.FrameHelloAck, ack.MarshalBinary()) != nil {
			return
		}
		cfg := yamux.DefaultConfig()
		cfg.LogOutput = io.Discard
		cfg.EnableKeepAlive = false
		mux, err := yamux.Server(&frames{nc: nc}, cfg)
		if err != nil {
			return
		}
		defer mux.Close()
		chunk := make([]byte, 32<<10)
		var wg sync.WaitGroup
		for i := 0; i < streams; i++ {
			st, err := mux.OpenStream()
			if err != nil {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = st.SetWriteDeadline(time.Now().Add(5 * time.Second))
				for n := 0; n < perStream; n += len(chunk) {
					w, err := st.Write(chunk)
					mu.Lock()
					pushed += int64(w)
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
		wg.Wait()
	}()
	cl, _, err := conn.Handshake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl, func() int64 {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return pushed
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A guest that opens streams of its own (256 of them, each filled with a
// 256 KiB receive window: 64 MiB a session could pin) gets its session
// ended, and the host holds none of it.
func TestGuestOpenedStreamsEndTheSession(t *testing.T) {
	before := liveHeap()
	cl, pushed := hostileGuest(t, 256, 256<<10)
	n := pushed() // the guest is done: every write went through or failed
	grew := int64(liveHeap()) - int64(before)
	t.Logf("guest pushed %d bytes; host heap grew %d bytes", n, grew)
	if grew > 4<<20 {
		t.Errorf("the host holds %d MiB after a guest pushed %d MiB on streams of its own", grew>>20, n>>20)
	}
	select {
	case <-cl.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the session outlived the guest opening streams")
	}
	if !cl.RefusedGuestStream() {
		t.Error("the session did not say it refused a guest stream")
	}
}
