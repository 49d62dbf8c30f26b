// Package guestconn is the host side of the guest-agent channel: it connects
// to a VM's virtio-serial socket, starts a session (Hello), and implements
// pandastack.Guest over it.
package guestconn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"
	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// Conn is a transport to the guest's port, not yet in a session.
type Conn struct {
	nc  net.Conn
	buf []byte
}

// Dial connects to the unix socket QEMU serves the agent port on.
func Dial(ctx context.Context, path string) (*Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect agent socket: %w", err)
	}
	return &Conn{nc: nc}, nil
}

// NewConn wraps an established transport (tests).
func NewConn(nc net.Conn) *Conn { return &Conn{nc: nc} }

// Close closes the transport.
func (c *Conn) Close() error { return c.nc.Close() }

// Handshake sends Hello (the host's clock and fresh entropy) and waits for the
// agent's answer: the moment a sandbox is ready.
func (c *Conn) Handshake(ctx context.Context) (*Client, guestproto.HelloAck, error) {
	cl := newClient(c)
	ack, err := cl.begin(ctx)
	if err != nil {
		return nil, ack, err
	}
	return cl, ack, nil
}

// Deferred is a Client on c whose session begins at its first operation,
// not now: the Hello, with what it does in the guest (the RNG reseed, the
// clock step), is sent then, bounded by timeout. For a VM its caller
// reaches another way first, doing that part itself (a fresh function
// invocation on the direct port: under TCG the agent's answer is ~80 ms
// of first-run guest code). begun, if not nil, runs once the agent has
// answered.
func (c *Conn) Deferred(timeout time.Duration, begun func()) *Client {
	cl := newClient(c)
	cl.timeout, cl.begun = timeout, begun
	return cl
}

func newClient(c *Conn) *Client {
	cl := &Client{conn: c, done: make(chan struct{})}
	cl.pr, cl.pw = io.Pipe()
	return cl
}

// hello sends a Hello and waits for its answer.
func (c *Conn) hello(ctx context.Context) (guestproto.HelloAck, error) {
	var ack guestproto.HelloAck
	seed := make([]byte, 64)
	_, _ = rand.Read(seed)
	sid := make([]byte, 8)
	_, _ = rand.Read(sid)
	h := guestproto.Hello{Session: hex.EncodeToString(sid), UnixNanos: time.Now().UnixNano(), Seed: seed}
	b := h.MarshalBinary()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := guestproto.WriteFrame(c.nc, guestproto.FrameHello, b); err != nil {
		return ack, fmt.Errorf("send hello: %w", err)
	}
	for {
		typ, p, buf, err := guestproto.ReadFrame(c.nc, c.buf)
		c.buf = buf
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return ack, fmt.Errorf("wait for agent hello: %w", err)
		}
		if typ != guestproto.FrameHelloAck {
			continue // stale bytes from an earlier session
		}
		if ack, err = guestproto.UnmarshalHelloAck(p); err != nil {
			return ack, fmt.Errorf("decode hello ack: %w", err)
		}
		if ack.Session == h.Session {
			break
		}
	}
	stop()
	_ = c.nc.SetDeadline(time.Time{})
	return ack, nil
}

// begin shakes hands and starts the session's multiplexer.
func (c *Client) begin(ctx context.Context) (guestproto.HelloAck, error) {
	ack, err := c.conn.hello(ctx)
	if err != nil {
		return ack, err
	}
	mux, err := yamux.Client(c, muxConfig())
	if err != nil {
		return ack, err
	}
	c.mux = mux
	go c.readLoop()
	go c.refuseGuestStreams()
	go func() {
		select {
		case <-mux.CloseChan():
			c.Close()
		case <-c.done:
		}
	}()
	return ack, nil
}

// session is the client's multiplexer, the session begun first if it was
// deferred (Deferred).
func (c *Client) session(ctx context.Context) (*yamux.Session, error) {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.mux != nil {
		return c.mux, nil
	}
	select {
	case <-c.done:
		return nil, unavailable(net.ErrClosed)
	default:
	}
	hctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.begin(hctx); err != nil {
		return nil, unavailable(fmt.Errorf("begin the deferred session: %w", err))
	}
	if c.begun != nil {
		c.begun()
	}
	return c.mux, nil
}

// refuseGuestStreams ends the session when the guest opens a stream: the
// protocol has none the guest starts, and yamux would queue each one (up to
// its accept backlog) with a receive window of data the host never reads —
// memory a hostile guest could pin. The session's end frees it all.
func (c *Client) refuseGuestStreams() {
	st, err := c.mux.AcceptStream()
	if err != nil {
		return // the session ended
	}
	st.Close()
	c.refused.Store(true)
	c.mux.Close()
	c.Close()
}

// RefusedGuestStream reports whether the session was ended because the
// guest opened a stream (a broken or hostile agent).
func (c *Client) RefusedGuestStream() bool { return c.refused.Load() }

func muxConfig() *yamux.Config {
	c := yamux.DefaultConfig()
	c.EnableKeepAlive = false
	c.ConnectionWriteTimeout = 10 * time.Minute
	c.MaxStreamWindowSize = 1 << 20
	c.StreamOpenTimeout = 30 * time.Second
	c.LogOutput = io.Discard
	return c
}

// Client is a session with a guest agent. Safe for concurrent use.
type Client struct {
	conn    *Conn
	pr      *io.PipeReader
	pw      *io.PipeWriter
	wmu     sync.Mutex
	once    sync.Once
	refused atomic.Bool
	done    chan struct{} // closed by Close

	smu     sync.Mutex
	mux     *yamux.Session // nil until a deferred session begins
	timeout time.Duration  // a deferred session's handshake
	begun   func()
}

// Read, Write and Close make the Client the yamux transport.
func (c *Client) Read(p []byte) (int, error) { return c.pr.Read(p) }

func (c *Client) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for off := 0; off < len(p); {
		n := min(len(p)-off, 64<<10)
		if err := guestproto.WriteFrame(c.conn.nc, guestproto.FrameData, p[off:off+n]); err != nil {
			return off, err
		}
		off += n
	}
	return len(p), nil
}

// Close ends the session and the transport.
func (c *Client) Close() error {
	c.once.Do(func() {
		close(c.done)
		c.pw.CloseWithError(io.EOF)
		c.conn.Close()
	})
	return nil
}

func (c *Client) readLoop() {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		typ, p, b, err := guestproto.ReadFrame(c.conn.nc, buf)
		buf = b
		if err != nil {
			c.pw.CloseWithError(err)
			return
		}
		if typ == guestproto.FrameData {
			if _, err := c.pw.Write(p); err != nil {
				return
			}
		}
	}
}

// Done is closed when the session is over.
func (c *Client) Done() <-chan struct{} { return c.done }

// openStream opens a stream in the session (begun first if deferred).
func (c *Client) openStream(ctx context.Context) (net.Conn, error) {
	mux, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	st, err := mux.OpenStream()
	if err != nil {
		return nil, unavailable(err)
	}
	return st, nil
}

// open starts an operation on a new stream. Cancelling ctx closes the stream.
func (c *Client) open(ctx context.Context, req guestproto.Request) (*guestproto.Conn, func(), error) {
	st, err := c.openStream(ctx)
	if err != nil {
		return nil, nil, unavailable(err)
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	done := func() { stop(); st.Close() }
	gc := guestproto.NewConn(st)
	if err := gc.WriteJSON(guestproto.PktRequest, req); err != nil {
		done()
		return nil, nil, unavailable(err)
	}
	return gc, done, nil
}

// call runs a request with a single JSON answer.
func (c *Client) call(ctx context.Context, req guestproto.Request, out any) error {
	gc, done, err := c.open(ctx, req)
	if err != nil {
		return err
	}
	defer done()
	return c.mapErr(ctx, gc.ReadJSON(guestproto.PktOK, out))
}

func unavailable(err error) error {
	return &pandastack.Error{Code: pandastack.EUnavailable, Message: "the sandbox's guest agent is not reachable", Err: err}
}

// mapErr turns guest errors into pandastack errors.
func (c *Client) mapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ge *guestproto.Error
	if errors.As(err, &ge) {
		code := pandastack.EInternal
		switch ge.Code {
		case guestproto.ErrNotFound:
			code = pandastack.ENotFound
		case guestproto.ErrExists, guestproto.ErrNotEmpty:
			code = pandastack.EConflict
		case guestproto.ErrPermission:
			code = pandastack.EForbidden
		case guestproto.ErrIsDir, guestproto.ErrNotDir, guestproto.ErrInvalid:
			code = pandastack.EInvalid
		case guestproto.ErrRefused:
			code = pandastack.ERefused
		}
		return &pandastack.Error{Code: code, Message: ge.Message}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return unavailable(err)
}

var _ pandastack.Guest = (*Client)(nil)
