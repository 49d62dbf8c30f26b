package guestconn

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// Ping measures one round trip through the agent.
func (c *Client) Ping(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	err := c.call(ctx, guestproto.Request{Op: guestproto.OpPing}, nil)
	return time.Since(t0), err
}

// Sync flushes the guest's disks (before a snapshot).
func (c *Client) Sync(ctx context.Context) error {
	return c.call(ctx, guestproto.Request{Op: guestproto.OpSync}, nil)
}

// Exec runs a command. Cancelling ctx kills a foreground command.
func (c *Client) Exec(ctx context.Context, req pandastack.ExecRequest, stdin io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	var res pandastack.ExecResult
	if len(req.Args) == 0 && req.Cmd == "" {
		return res, pandastack.Errorf(pandastack.EInvalid, "exec needs cmd or args")
	} else if len(req.Args) > 0 && req.Cmd != "" {
		return res, pandastack.Errorf(pandastack.EInvalid, "exec takes cmd or args, not both")
	}
	if req.TimeoutSeconds < 0 || math.IsNaN(req.TimeoutSeconds) {
		return res, pandastack.Errorf(pandastack.EInvalid, "timeout_seconds must not be negative")
	}
	if len(req.Stdin) > 0 && stdin == nil {
		stdin = bytesReader(req.Stdin)
	}
	gr := guestproto.Request{Op: guestproto.OpExec, Shell: req.Cmd, Args: req.Args, Env: req.Env, Cwd: req.Cwd, User: req.User,
		TimeoutMs: int64(req.TimeoutSeconds * 1000), Background: req.Background, Follow: req.Background && req.Follow,
		Stdin: stdin != nil && !req.Background}
	gc, done, err := c.open(ctx, gr)
	if err != nil {
		return res, err
	}
	defer done()
	var st guestproto.Started
	if err := gc.ReadJSON(guestproto.PktStarted, &st); err != nil {
		return res, c.mapErr(ctx, err)
	}
	if err := fn(pandastack.ExecEvent{Type: "start", PID: st.PID}); err != nil {
		return res, err
	}
	if req.Background && !req.Follow {
		return res, nil
	}
	if gr.Stdin {
		go func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := stdin.Read(buf)
				if n > 0 && gc.Write(guestproto.PktStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					_ = gc.Write(guestproto.PktStdinEOF, nil)
					return
				}
			}
		}()
	}
	return c.follow(ctx, gc, fn)
}

// follow relays output packets until the exit packet.
func (c *Client) follow(ctx context.Context, gc *guestproto.Conn, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	var res pandastack.ExecResult
	for {
		typ, p, err := gc.Read()
		if err != nil {
			return res, c.mapErr(ctx, fmt.Errorf("read exec output: %w", err))
		}
		switch typ {
		case guestproto.PktStdout, guestproto.PktStderr:
			ev := pandastack.ExecEvent{Type: "stdout", Data: append([]byte(nil), p...)}
			if typ == guestproto.PktStderr {
				ev.Type = "stderr"
			}
			if err := fn(ev); err != nil {
				return res, err
			}
		case guestproto.PktExit:
			var e guestproto.Exit
			if err := json.Unmarshal(p, &e); err != nil {
				return res, c.mapErr(ctx, fmt.Errorf("decode exit: %w", err))
			}
			res = pandastack.ExecResult{ExitCode: e.ExitCode, Signal: e.Signal, TimedOut: e.TimedOut, DurationMs: e.DurationMs}
			if ctx.Err() != nil {
				return res, ctx.Err() // killed because the caller went away
			}
			return res, fn(pandastack.ExecEvent{Type: "exit", Result: &res})
		case guestproto.PktError:
			var ge guestproto.Error
			_ = json.Unmarshal(p, &ge)
			return res, c.mapErr(ctx, &ge)
		}
	}
}

// Processes lists the commands the agent started.
func (c *Client) Processes(ctx context.Context) ([]pandastack.Process, error) {
	var rows []struct {
		PID        int       `json:"pid"`
		Args       []string  `json:"args"`
		Background bool      `json:"background"`
		Running    bool      `json:"running"`
		ExitCode   *int      `json:"exit_code"`
		StartedAt  time.Time `json:"started_at"`
	}
	if err := c.call(ctx, guestproto.Request{Op: guestproto.OpPs}, &rows); err != nil {
		return nil, err
	}
	out := make([]pandastack.Process, 0, len(rows))
	for _, r := range rows {
		p := pandastack.Process{PID: r.PID, Args: r.Args, Background: r.Background, Running: r.Running, ExitCode: r.ExitCode, StartedAt: r.StartedAt}
		if len(r.Args) == 3 && r.Args[0] == "/bin/sh" && r.Args[1] == "-c" {
			p.Cmd = r.Args[2]
		}
		out = append(out, p)
	}
	return out, nil
}

// Attach follows a background process's output from its start.
func (c *Client) Attach(ctx context.Context, pid int, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	gc, done, err := c.open(ctx, guestproto.Request{Op: guestproto.OpAttach, PID: pid})
	if err != nil {
		return pandastack.ExecResult{}, err
	}
	defer done()
	var st guestproto.Started
	if err := gc.ReadJSON(guestproto.PktStarted, &st); err != nil {
		return pandastack.ExecResult{}, c.mapErr(ctx, err)
	}
	if err := fn(pandastack.ExecEvent{Type: "start", PID: st.PID}); err != nil {
		return pandastack.ExecResult{}, err
	}
	return c.follow(ctx, gc, fn)
}

// Signal sends a signal to a process's group.
func (c *Client) Signal(ctx context.Context, pid int, signal string) error {
	return c.call(ctx, guestproto.Request{Op: guestproto.OpSignal, PID: pid, Signal: signal}, nil)
}

// ReadFile streams a file to w; start is called with its metadata before the
// first byte.
func (c *Client) ReadFile(ctx context.Context, path string, w io.Writer, start func(pandastack.FileInfo) error) error {
	gc, done, err := c.open(ctx, guestproto.Request{Op: guestproto.OpRead, Path: path})
	if err != nil {
		return err
	}
	defer done()
	var fi pandastack.FileInfo
	if err := gc.ReadJSON(guestproto.PktOK, &fi); err != nil {
		return c.mapErr(ctx, err)
	}
	if start != nil {
		if err := start(fi); err != nil {
			return err
		}
	}
	for {
		typ, p, err := gc.Read()
		if err != nil {
			return c.mapErr(ctx, fmt.Errorf("read %s: %w", path, err))
		}
		switch typ {
		case guestproto.PktData:
			if _, err := w.Write(p); err != nil {
				return err
			}
		case guestproto.PktEOF:
			return nil
		case guestproto.PktError:
			var ge guestproto.Error
			_ = json.Unmarshal(p, &ge)
			return c.mapErr(ctx, &ge)
		}
	}
}

// WriteFile streams r into path (created with its parents, replaced whole).
func (c *Client) WriteFile(ctx context.Context, path string, mode uint32, r io.Reader) (pandastack.FileInfo, error) {
	var fi pandastack.FileInfo
	gc, done, err := c.open(ctx, guestproto.Request{Op: guestproto.OpWrite, Path: path, Mode: mode})
	if err != nil {
		return fi, err
	}
	defer done()
	// The agent may refuse before reading anything (bad path): watch for it.
	answer := make(chan error, 1)
	go func() { answer <- gc.ReadJSON(guestproto.PktOK, &fi) }()
	buf := make([]byte, 256<<10)
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if err := gc.Write(guestproto.PktData, buf[:n]); err != nil {
				select {
				case aerr := <-answer:
					return fi, c.mapErr(ctx, aerr)
				case <-time.After(5 * time.Second):
				}
				return fi, c.mapErr(ctx, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fi, fmt.Errorf("read upload body: %w", rerr)
		}
		select {
		case aerr := <-answer:
			if aerr == nil {
				aerr = fmt.Errorf("agent answered before the upload ended")
			}
			return fi, c.mapErr(ctx, aerr)
		default:
		}
	}
	if err := gc.Write(guestproto.PktEOF, nil); err != nil {
		return fi, c.mapErr(ctx, err)
	}
	return fi, c.mapErr(ctx, <-answer)
}

// ListDir lists a directory.
func (c *Client) ListDir(ctx context.Context, path string) ([]pandastack.FileInfo, error) {
	out := []pandastack.FileInfo{}
	err := c.call(ctx, guestproto.Request{Op: guestproto.OpList, Path: path}, &out)
	return out, err
}

// Stat describes a path (without following a final symlink).
func (c *Client) Stat(ctx context.Context, path string) (pandastack.FileInfo, error) {
	var fi pandastack.FileInfo
	err := c.call(ctx, guestproto.Request{Op: guestproto.OpStat, Path: path}, &fi)
	return fi, err
}

// MakeDir creates a directory and its parents.
func (c *Client) MakeDir(ctx context.Context, path string) error {
	return c.call(ctx, guestproto.Request{Op: guestproto.OpMkdir, Path: path}, nil)
}

// Remove deletes a path; recursive removes a directory tree.
func (c *Client) Remove(ctx context.Context, path string, recursive bool) error {
	return c.call(ctx, guestproto.Request{Op: guestproto.OpRemove, Path: path, Recursive: recursive}, nil)
}

// Rename moves a path.
func (c *Client) Rename(ctx context.Context, from, to string) error {
	return c.call(ctx, guestproto.Request{Op: guestproto.OpRename, Path: from, To: to}, nil)
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b} }

// DialPort connects to a TCP port inside the guest through the agent.
func (c *Client) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, pandastack.Errorf(pandastack.EInvalid, "port %d is outside 1-65535", port)
	}
	st, err := c.openStream(ctx)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	gc := guestproto.NewConn(st)
	if err := gc.WriteJSON(guestproto.PktRequest, guestproto.Request{Op: guestproto.OpDial, Port: port}); err != nil {
		st.Close()
		return nil, unavailable(err)
	}
	if err := gc.ReadJSON(guestproto.PktOK, nil); err != nil {
		st.Close()
		return nil, c.mapErr(ctx, err)
	}
	return st, nil
}
