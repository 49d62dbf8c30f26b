package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// portWriter serialises frames onto the port. A session's writes are dropped
// once it has been replaced, so nothing stale reaches a new host.
type portWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *portWriter) frame(typ byte, payload []byte, live func() bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if live != nil && !live() {
		return net.ErrClosed
	}
	return guestproto.WriteFrame(p.w, typ, payload)
}

// session is one host connection: a yamux server fed by Data frames.
type session struct {
	id     string
	port   *portWriter
	pr     *io.PipeReader
	pw     *io.PipeWriter
	mux    *yamux.Session
	mu     sync.Mutex
	closed bool
}

func (s *session) live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed
}

// Read, Write and Close make the session the yamux transport.
func (s *session) Read(p []byte) (int, error) { return s.pr.Read(p) }

func (s *session) Write(p []byte) (int, error) {
	for off := 0; off < len(p); {
		n := min(len(p)-off, 64<<10)
		if err := s.port.frame(guestproto.FrameData, p[off:off+n], s.live); err != nil {
			return off, err
		}
		off += n
	}
	return len(p), nil
}

func (s *session) Close() error {
	s.port.mu.Lock()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.port.mu.Unlock()
	s.pw.CloseWithError(io.EOF)
	return nil
}

func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = false // a paused VM must not look dead
	c.ConnectionWriteTimeout = 10 * time.Minute
	c.MaxStreamWindowSize = 1 << 20
	c.AcceptBacklog = 1024
	c.LogOutput = io.Discard
	return c
}

// openPort finds the agent's virtio-serial port, or opens path: a character
// device, or a unix socket to connect to (tests).
func openPort(path string) (io.ReadWriteCloser, bool, error) {
	if strings.HasPrefix(path, "unix:") {
		c, err := net.Dial("unix", strings.TrimPrefix(path, "unix:"))
		return c, false, err
	}
	if path == "" {
		for i := 0; path == ""; i++ {
			names, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
			for _, n := range names {
				if b, _ := os.ReadFile(n); strings.TrimSpace(string(b)) == guestproto.PortName {
					path = "/dev/" + filepath.Base(filepath.Dir(n))
				}
			}
			if path == "" {
				if i > 2000 {
					return nil, false, fmt.Errorf("virtio-serial port %q not found", guestproto.PortName)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	return f, true, err
}

// serveDevice serves hosts on the port until a fatal error. On a virtio port,
// end of file means the host went away: the session ends and the agent waits
// for the next Hello.
func (a *agent) serveDevice(ctx context.Context, path string) error {
	port, isDevice, err := openPort(path)
	if err != nil {
		return fmt.Errorf("open agent port: %w", err)
	}
	defer port.Close()
	pw := &portWriter{w: port}
	hw := newHostWait()
	var cur *session
	buf := make([]byte, 64<<10)
	for {
		var typ byte
		var payload []byte
		typ, payload, buf, err = guestproto.ReadFrame(port, buf)
		if err != nil {
			if cur != nil {
				cur.mux.Close()
				cur = nil
			}
			if !isDevice {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return fmt.Errorf("read port: %w", err)
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				log.Printf("read port: %v", err)
			}
			hw.wait() // no host connected: wait for one
			continue
		}
		hw.connected()
		switch typ {
		case guestproto.FrameHello:
			if cur != nil {
				// Silence the old session now; tear it down off the path.
				cur.Close()
				go cur.mux.Close()
			}
			cur, err = a.hello(pw, payload)
			if err != nil {
				log.Printf("hello: %v", err)
			}
		case guestproto.FrameData:
			if cur != nil {
				if _, err := cur.pw.Write(payload); err != nil {
					log.Printf("session %s: %v", cur.id, err)
				}
			}
		default:
			log.Printf("unknown frame type %d", typ)
		}
	}
}

// hello starts a session: it reseeds the RNG and publishes a new generation
// (see rngState.restored), answers, then steps the clock. The new stream
// session is set up before the next frame is read, so no command of the new
// session can run before any of it.
func (a *agent) hello(pw *portWriter, payload []byte) (*session, error) {
	h, err := guestproto.UnmarshalHello(payload)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	// The RNG reseed comes before the answer: the host hands out a sandbox
	// once it has the answer, so nothing it or a user does after that sees
	// the snapshot's random state. The clock step comes after it: a jump of
	// the wall clock wakes every realtime timer in the guest, work that
	// would otherwise delay the answer.
	if err := a.rng.restored(h.Seed); err != nil {
		log.Printf("%v", err)
	}
	a.sessions++
	s := &session{id: h.Session, port: pw}
	ack := guestproto.HelloAck{Session: h.Session, Version: pandastack.Version, BootID: a.bootID, Sessions: a.sessions}
	if err := pw.frame(guestproto.FrameHelloAck, ack.MarshalBinary(), s.live); err != nil {
		return nil, err
	}
	if err := stepClock(h.UnixNanos); err != nil && os.Getpid() == 1 {
		log.Printf("step clock: %v", err)
	}
	s.pr, s.pw = io.Pipe()
	mux, err := yamux.Server(s, muxConfig())
	if err != nil {
		return nil, err
	}
	s.mux = mux
	go func() {
		for {
			st, err := mux.AcceptStream()
			if err != nil {
				return
			}
			go a.handle(st)
		}
	}()
	return s, nil
}

// handle serves one operation on one stream.
func (a *agent) handle(st net.Conn) {
	defer st.Close()
	c := guestproto.NewConn(st)
	var req guestproto.Request
	if err := c.ReadJSON(guestproto.PktRequest, &req); err != nil {
		return
	}
	var err error
	switch req.Op {
	case guestproto.OpPing:
		err = c.WriteJSON(guestproto.PktOK, map[string]any{"pong": true})
	case guestproto.OpExec:
		err = a.exec(c, req)
	case guestproto.OpAttach:
		err = a.attach(c, req)
	case guestproto.OpPs:
		err = c.WriteJSON(guestproto.PktOK, a.procs.list())
	case guestproto.OpSignal:
		err = a.procs.signal(req.PID, req.Signal)
		if err == nil {
			err = c.WriteJSON(guestproto.PktOK, struct{}{})
		}
	case guestproto.OpRead:
		err = readFile(c, req)
	case guestproto.OpWrite:
		err = writeFile(c, req)
	case guestproto.OpList, guestproto.OpStat, guestproto.OpMkdir, guestproto.OpRemove, guestproto.OpRename:
		var res any
		res, err = fileOp(req)
		if err == nil {
			err = c.WriteJSON(guestproto.PktOK, res)
		}
	case guestproto.OpWatch:
		err = watch(c, req)
	case guestproto.OpDial:
		err = dial(c, st, req.Port)
	case guestproto.OpSync, guestproto.OpPrepare:
		syncDisks()
		err = c.WriteJSON(guestproto.PktOK, struct{}{})
	default:
		err = &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("unknown operation %q", req.Op)}
	}
	if err != nil {
		var ge *guestproto.Error
		if !errors.As(err, &ge) {
			ge = toProtoError(err)
		}
		_ = c.WriteJSON(guestproto.PktError, ge)
	}
}
