package guestconn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// Terminal starts a command on a pseudo-terminal in the guest. The
// terminal holds one stream until it ends or is closed; ctx bounds only the
// start.
func (c *Client) Terminal(ctx context.Context, req pandastack.TerminalRequest) (pandastack.Terminal, error) {
	if len(req.Args) > 0 && req.Cmd != "" {
		return nil, pandastack.Errorf(pandastack.EInvalid, "a terminal takes cmd or args, not both")
	}
	if err := pandastack.CheckTerminalSize(req.Rows, req.Cols); err != nil {
		return nil, err
	}
	if req.TimeoutSeconds < 0 || math.IsNaN(req.TimeoutSeconds) {
		return nil, pandastack.Errorf(pandastack.EInvalid, "timeout_seconds must not be negative")
	}
	gr := guestproto.Request{Op: guestproto.OpExec, Shell: req.Cmd, Args: req.Args, Env: req.Env, Cwd: req.Cwd, User: req.User,
		TimeoutMs: int64(req.TimeoutSeconds * 1000), Pty: &guestproto.Winsize{Rows: uint16(req.Rows), Cols: uint16(req.Cols)}}
	gc, done, err := c.open(context.Background(), gr)
	if err != nil {
		return nil, err
	}
	// Until the start is answered, ctx may abort it.
	stop := context.AfterFunc(ctx, done)
	var st guestproto.Started
	err = gc.ReadJSON(guestproto.PktStarted, &st)
	if !stop() || err != nil {
		done()
		if err == nil {
			err = ctx.Err()
		}
		return nil, c.mapErr(ctx, err)
	}
	return &terminal{c: c, gc: gc, done: done, pid: st.PID}, nil
}

// terminal is a command on a guest pseudo-terminal, over one stream.
type terminal struct {
	c    *Client
	gc   *guestproto.Conn
	done func()
	pid  int

	wmu sync.Mutex // one packet written at a time

	rest   []byte // output read from a packet but not yet returned
	res    pandastack.ExecResult
	resErr error
	ended  bool
}

func (t *terminal) PID() int { return t.pid }

func (t *terminal) Read(p []byte) (int, error) {
	for len(t.rest) == 0 {
		if t.ended {
			return 0, io.EOF
		}
		typ, pkt, err := t.gc.Read()
		if err != nil {
			t.ended, t.resErr = true, t.c.mapErr(context.Background(), fmt.Errorf("read terminal output: %w", err))
			return 0, t.resErr
		}
		switch typ {
		case guestproto.PktStdout, guestproto.PktStderr:
			t.rest = append(t.rest[:0], pkt...)
		case guestproto.PktExit:
			var e guestproto.Exit
			if err := json.Unmarshal(pkt, &e); err != nil {
				t.resErr = fmt.Errorf("decode exit: %w", err)
			}
			t.res = pandastack.ExecResult{ExitCode: e.ExitCode, Signal: e.Signal, TimedOut: e.TimedOut, DurationMs: e.DurationMs}
			t.ended = true
		case guestproto.PktError:
			var ge guestproto.Error
			_ = json.Unmarshal(pkt, &ge)
			t.ended, t.resErr = true, t.c.mapErr(context.Background(), &ge)
			return 0, t.resErr
		}
	}
	n := copy(p, t.rest)
	t.rest = t.rest[n:]
	return n, nil
}

// Write types input; large input goes in packets of at most 32 KiB.
func (t *terminal) Write(p []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	for off := 0; off < len(p); {
		n := min(len(p)-off, 32<<10)
		if err := t.gc.Write(guestproto.PktStdin, p[off:off+n]); err != nil {
			return off, unavailable(err)
		}
		off += n
	}
	return len(p), nil
}

func (t *terminal) send(typ byte, v any) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if err := t.gc.WriteJSON(typ, v); err != nil {
		return unavailable(err)
	}
	return nil
}

func (t *terminal) Resize(ctx context.Context, rows, cols int) error {
	if err := pandastack.CheckTerminalSize(rows, cols); err != nil {
		return err
	}
	return t.send(guestproto.PktResize, guestproto.Winsize{Rows: uint16(rows), Cols: uint16(cols)})
}

func (t *terminal) Signal(ctx context.Context, signal string) error {
	if signal == "" {
		return pandastack.Errorf(pandastack.EInvalid, "signal is required")
	}
	return t.send(guestproto.PktSignal, guestproto.Request{Signal: signal})
}

func (t *terminal) Wait() (pandastack.ExecResult, error) { return t.res, t.resErr }

// Close kills the command (the guest kills what a closed stream ran).
func (t *terminal) Close() error {
	t.done()
	return nil
}
