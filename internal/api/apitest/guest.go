package apitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Guest is a FAKE pandastack.Guest: an in-memory file system plus a toy
// command interpreter standing in for a shell. Commands (cmd split on ";",
// words split on spaces, no quoting; or args as one command):
//
//	echo WORDS...   WORDS and a newline on stdout
//	err WORDS...    WORDS and a newline on stderr
//	hex HEX         the decoded bytes on stdout (binary output)
//	cat             stdin to stdout
//	yes N           N bytes of 'y' on stdout, in 64 KiB chunks
//	sleep SECONDS   waits (a timeout or signal interrupts it)
//	pwd, whoami     the cwd ("/" by default), the user ("root" by default)
//	getenv NAME     the environment variable NAME
//	exit N          stops with exit code N
//
// Anything else prints "sh: NAME: not found" on stderr and exits 127. A
// timeout ends the command with exit code 137 and SIGKILL; a signal S ends
// a sleeping command with 128+S.
type Guest struct {
	// ExecHook, when set, runs foreground execs instead of the interpreter.
	ExecHook func(ctx context.Context, req pandastack.ExecRequest, stdin io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error)
	// ReadHook, when set, serves ReadFile instead of the file system.
	ReadHook func(ctx context.Context, path string, w io.Writer, start func(pandastack.FileInfo) error) error
	// DialHook, when set, serves DialPort (a listener the test plays).
	DialHook func(ctx context.Context, port int) (net.Conn, error)

	mu      sync.Mutex
	files   map[string]*node
	procs   map[int]*proc
	nextPID int
	env     map[string]string
	closed  bool
}

var _ pandastack.Guest = (*Guest)(nil)

type node struct {
	data  []byte
	mode  uint32
	dir   bool
	mtime time.Time
}

// NewGuest returns a fake guest with /, /tmp, /root and /home/user.
func NewGuest() *Guest {
	g := &Guest{files: map[string]*node{}, procs: map[int]*proc{}, nextPID: 100}
	now := time.Now().UTC()
	for _, d := range []string{"/", "/tmp", "/root", "/home", "/home/user"} {
		g.files[d] = &node{dir: true, mode: 0o755, mtime: now}
	}
	return g
}

func (g *Guest) shutdown() {
	g.mu.Lock()
	g.closed = true
	procs := slices.Collect(maps.Values(g.procs))
	g.mu.Unlock()
	for _, p := range procs {
		p.kill("SIGKILL")
	}
}

func (g *Guest) check() error {
	if g.closed {
		return pandastack.Errorf(pandastack.EGone, "sandbox is gone")
	}
	return nil
}

// ---- processes ----

// proc is one command; its events are kept so Attach can replay them.
type proc struct {
	info   pandastack.Process
	cancel context.CancelCauseFunc

	mu      sync.Mutex
	events  []pandastack.ExecEvent
	changed chan struct{}
	done    bool
	result  pandastack.ExecResult
}

type signalCause struct{ name string }

func (s signalCause) Error() string { return "signal " + s.name }

func (p *proc) kill(sig string) { p.cancel(signalCause{sig}) }

func (p *proc) record(ev pandastack.ExecEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, ev)
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *proc) finish(res pandastack.ExecResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done, p.result = true, res
	p.info.Running = false
	code := res.ExitCode
	p.info.ExitCode = &code
	close(p.changed)
	p.changed = make(chan struct{})
}

func (g *Guest) newProc(req pandastack.ExecRequest, argv []string, parent context.Context) (*proc, context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.nextPID++
	p := &proc{
		info: pandastack.Process{
			PID: g.nextPID, Cmd: req.Cmd, Args: argv, Background: req.Background,
			Running: true, StartedAt: time.Now().UTC(),
		},
		cancel:  cancel,
		changed: make(chan struct{}),
	}
	g.procs[p.info.PID] = p
	return p, ctx
}

func (g *Guest) Exec(ctx context.Context, req pandastack.ExecRequest, stdin io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	g.mu.Lock()
	err := g.check()
	g.mu.Unlock()
	if err != nil {
		return pandastack.ExecResult{}, err
	}
	if !req.Background && g.ExecHook != nil {
		return g.ExecHook(ctx, req, stdin, fn)
	}
	argv := req.Args
	if len(argv) == 0 {
		argv = []string{"/bin/sh", "-c", req.Cmd}
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	if req.Background {
		// A background command outlives the request that started it.
		p, pctx := g.newProc(req, argv, context.Background())
		if err := fn(pandastack.ExecEvent{Type: "start", PID: p.info.PID}); err != nil {
			p.kill("SIGKILL")
			return pandastack.ExecResult{}, err
		}
		go func() {
			res, _ := g.run(pctx, req, stdin, func(ev pandastack.ExecEvent) error { p.record(ev); return nil })
			p.finish(res)
		}()
		return pandastack.ExecResult{}, nil
	}
	p, pctx := g.newProc(req, argv, ctx)
	defer p.cancel(nil)
	if err := fn(pandastack.ExecEvent{Type: "start", PID: p.info.PID}); err != nil {
		return pandastack.ExecResult{}, err
	}
	res, err := g.run(pctx, req, stdin, fn)
	p.finish(res)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return res, err
}

// run interprets a command, delivering output to fn.
func (g *Guest) run(ctx context.Context, req pandastack.ExecRequest, stdin io.Reader, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	start := time.Now()
	if req.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, time.Duration(req.TimeoutSeconds*float64(time.Second)), errTimeout)
		defer cancel()
	}
	var cmds [][]string
	if len(req.Args) > 0 {
		cmds = [][]string{req.Args}
	} else {
		for _, c := range strings.Split(req.Cmd, ";") {
			if f := strings.Fields(c); len(f) > 0 {
				cmds = append(cmds, f)
			}
		}
	}
	res := pandastack.ExecResult{}
	out := func(typ string, b []byte) error {
		return fn(pandastack.ExecEvent{Type: typ, Data: b})
	}
	for _, argv := range cmds {
		code, err := g.command(ctx, req, argv, stdin, out)
		if err != nil {
			if errors.Is(err, errStopped) {
				res = stoppedResult(ctx)
				break
			}
			res.DurationMs = msSince(start)
			return res, err
		}
		res.ExitCode = code
		if argv[0] == "exit" || code == 127 {
			break
		}
	}
	res.DurationMs = msSince(start)
	return res, nil
}

var (
	errTimeout = errors.New("timeout")
	errStopped = errors.New("stopped")
)

func stoppedResult(ctx context.Context) pandastack.ExecResult {
	cause := context.Cause(ctx)
	var sig signalCause
	switch {
	case errors.Is(cause, errTimeout):
		return pandastack.ExecResult{ExitCode: 137, Signal: "SIGKILL", TimedOut: true}
	case errors.As(cause, &sig):
		n := map[string]int{"SIGHUP": 1, "SIGINT": 2, "SIGKILL": 9, "SIGTERM": 15}[sig.name]
		if n == 0 {
			n = 9
		}
		return pandastack.ExecResult{ExitCode: 128 + n, Signal: sig.name}
	}
	return pandastack.ExecResult{ExitCode: 137, Signal: "SIGKILL"}
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func (g *Guest) command(ctx context.Context, req pandastack.ExecRequest, argv []string, stdin io.Reader, out func(string, []byte) error) (int, error) {
	if ctx.Err() != nil {
		return 0, errStopped
	}
	line := func(typ string, words []string) error { return out(typ, []byte(strings.Join(words, " ")+"\n")) }
	switch argv[0] {
	case "echo":
		return 0, line("stdout", argv[1:])
	case "err":
		return 0, line("stderr", argv[1:])
	case "hex":
		var b []byte
		if len(argv) > 1 {
			if _, err := fmt.Sscanf(argv[1], "%x", &b); err != nil {
				return 1, line("stderr", []string{"hex: bad input"})
			}
		}
		return 0, out("stdout", b)
	case "cat":
		buf := make([]byte, 32<<10)
		for {
			n, err := stdin.Read(buf)
			if n > 0 {
				if err := out("stdout", append([]byte(nil), buf[:n]...)); err != nil {
					return 0, err
				}
			}
			if err == io.EOF {
				return 0, nil
			}
			if err != nil {
				return 1, err
			}
		}
	case "yes":
		var n int
		if len(argv) > 1 {
			fmt.Sscan(argv[1], &n)
		}
		chunk := []byte(strings.Repeat("y", 64<<10))
		for n > 0 {
			if ctx.Err() != nil {
				return 0, errStopped
			}
			c := chunk[:min(n, len(chunk))]
			if err := out("stdout", c); err != nil {
				return 0, err
			}
			n -= len(c)
		}
		return 0, nil
	case "sleep":
		var sec float64
		if len(argv) > 1 {
			fmt.Sscan(argv[1], &sec)
		}
		select {
		case <-time.After(time.Duration(sec * float64(time.Second))):
			return 0, nil
		case <-ctx.Done():
			return 0, errStopped
		}
	case "pwd":
		cwd := req.Cwd
		if cwd == "" {
			cwd = "/"
		}
		return 0, line("stdout", []string{cwd})
	case "whoami":
		u := req.User
		if u == "" {
			u = "root"
		}
		return 0, line("stdout", []string{u})
	case "getenv":
		if len(argv) < 2 {
			return 1, nil
		}
		v, ok := req.Env[argv[1]]
		if !ok {
			g.mu.Lock()
			v = g.env[argv[1]]
			g.mu.Unlock()
		}
		return 0, line("stdout", []string{v})
	case "exit":
		var code int
		if len(argv) > 1 {
			fmt.Sscan(argv[1], &code)
		}
		return code, nil
	}
	return 127, line("stderr", []string{"sh: " + argv[0] + ": not found"})
}

func (g *Guest) Processes(context.Context) ([]pandastack.Process, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return nil, err
	}
	var out []pandastack.Process
	for _, p := range g.procs {
		p.mu.Lock()
		out = append(out, p.info)
		p.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b pandastack.Process) int { return a.PID - b.PID })
	return out, nil
}

func (g *Guest) proc(pid int) (*proc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return nil, err
	}
	p, ok := g.procs[pid]
	if !ok {
		return nil, pandastack.Errorf(pandastack.ENotFound, "no process with pid %d", pid)
	}
	return p, nil
}

// Attach replays a process's output so far, follows it to the end and
// returns how it ended.
func (g *Guest) Attach(ctx context.Context, pid int, fn func(pandastack.ExecEvent) error) (pandastack.ExecResult, error) {
	p, err := g.proc(pid)
	if err != nil {
		return pandastack.ExecResult{}, err
	}
	if err := fn(pandastack.ExecEvent{Type: "start", PID: pid}); err != nil {
		return pandastack.ExecResult{}, err
	}
	next := 0
	for {
		p.mu.Lock()
		evs := p.events[next:]
		next = len(p.events)
		done, res, changed := p.done, p.result, p.changed
		p.mu.Unlock()
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return pandastack.ExecResult{}, err
			}
		}
		if done {
			return res, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return pandastack.ExecResult{}, ctx.Err()
		}
	}
}

func (g *Guest) Signal(_ context.Context, pid int, signal string) error {
	p, err := g.proc(pid)
	if err != nil {
		return err
	}
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done {
		return pandastack.Errorf(pandastack.ENotFound, "process %d has exited", pid)
	}
	p.kill(signal)
	return nil
}

func (g *Guest) Ping(context.Context) (time.Duration, error) { return time.Millisecond, nil }

// ---- files ----

func errNotExist(p string) error {
	return pandastack.Errorf(pandastack.ENotFound, "%s: no such file or directory", p)
}

func (g *Guest) infoLocked(p string, n *node) pandastack.FileInfo {
	name := path.Base(p)
	return pandastack.FileInfo{Name: name, Path: p, Size: int64(len(n.data)), Mode: n.mode, IsDir: n.dir, ModTime: n.mtime}
}

// parentDirLocked checks that p's parent exists and is a directory.
func (g *Guest) parentDirLocked(p string) error {
	parent := path.Dir(p)
	n, ok := g.files[parent]
	if !ok {
		return errNotExist(parent)
	}
	if !n.dir {
		return pandastack.Errorf(pandastack.EInvalid, "%s: not a directory", parent)
	}
	return nil
}

func (g *Guest) ReadFile(ctx context.Context, p string, w io.Writer, start func(pandastack.FileInfo) error) error {
	if g.ReadHook != nil {
		return g.ReadHook(ctx, p, w, start)
	}
	g.mu.Lock()
	if err := g.check(); err != nil {
		g.mu.Unlock()
		return err
	}
	n, ok := g.files[p]
	if !ok {
		g.mu.Unlock()
		return errNotExist(p)
	}
	if n.dir {
		g.mu.Unlock()
		return pandastack.Errorf(pandastack.EInvalid, "%s is a directory", p)
	}
	fi := g.infoLocked(p, n)
	data := n.data
	g.mu.Unlock()
	if err := start(fi); err != nil {
		return err
	}
	for len(data) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := data[:min(len(data), 32<<10)]
		if _, err := w.Write(c); err != nil {
			return err
		}
		data = data[len(c):]
	}
	return nil
}

func (g *Guest) WriteFile(ctx context.Context, p string, mode uint32, r io.Reader) (pandastack.FileInfo, error) {
	g.mu.Lock()
	err := g.check()
	if err == nil {
		err = g.parentDirLocked(p)
	}
	if n, ok := g.files[p]; err == nil && ok && n.dir {
		err = pandastack.Errorf(pandastack.EInvalid, "%s is a directory", p)
	}
	g.mu.Unlock()
	if err != nil {
		return pandastack.FileInfo{}, err
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return pandastack.FileInfo{}, fmt.Errorf("read upload: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := &node{data: data, mode: mode, mtime: time.Now().UTC()}
	g.files[p] = n
	return g.infoLocked(p, n), nil
}

func (g *Guest) ListDir(_ context.Context, p string) ([]pandastack.FileInfo, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return nil, err
	}
	n, ok := g.files[p]
	if !ok {
		return nil, errNotExist(p)
	}
	if !n.dir {
		return nil, pandastack.Errorf(pandastack.EInvalid, "%s: not a directory", p)
	}
	var out []pandastack.FileInfo
	for q, c := range g.files {
		if q != p && path.Dir(q) == p {
			out = append(out, g.infoLocked(q, c))
		}
	}
	slices.SortFunc(out, func(a, b pandastack.FileInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (g *Guest) Stat(_ context.Context, p string) (pandastack.FileInfo, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return pandastack.FileInfo{}, err
	}
	n, ok := g.files[p]
	if !ok {
		return pandastack.FileInfo{}, errNotExist(p)
	}
	return g.infoLocked(p, n), nil
}

// MakeDir works like mkdir -p.
func (g *Guest) MakeDir(_ context.Context, p string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return err
	}
	var missing []string
	for q := p; ; q = path.Dir(q) {
		n, ok := g.files[q]
		if ok {
			if !n.dir {
				return pandastack.Errorf(pandastack.EConflict, "%s exists and is not a directory", q)
			}
			break
		}
		missing = append(missing, q)
	}
	for _, q := range missing {
		g.files[q] = &node{dir: true, mode: 0o755, mtime: time.Now().UTC()}
	}
	return nil
}

func under(q, dir string) bool {
	return q == dir || strings.HasPrefix(q, strings.TrimSuffix(dir, "/")+"/")
}

func (g *Guest) Remove(_ context.Context, p string, recursive bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return err
	}
	n, ok := g.files[p]
	if !ok {
		return errNotExist(p)
	}
	if n.dir && !recursive {
		for q := range g.files {
			if q != p && under(q, p) {
				return pandastack.Errorf(pandastack.EConflict, "%s: directory not empty", p)
			}
		}
	}
	for q := range g.files {
		if under(q, p) {
			delete(g.files, q)
		}
	}
	return nil
}

func (g *Guest) Rename(_ context.Context, from, to string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.check(); err != nil {
		return err
	}
	if _, ok := g.files[from]; !ok {
		return errNotExist(from)
	}
	if err := g.parentDirLocked(to); err != nil {
		return err
	}
	if under(to, from) && to != from {
		return pandastack.Errorf(pandastack.EInvalid, "cannot move %s into itself", from)
	}
	moved := map[string]*node{}
	for q, n := range g.files {
		if under(q, from) {
			moved[to+strings.TrimPrefix(q, from)] = n
			delete(g.files, q)
		}
	}
	for q, n := range moved {
		g.files[q] = n
	}
	return nil
}

// DialPort: the fake has no network; every port refuses unless DialHook
// is set.
func (g *Guest) DialPort(ctx context.Context, port int) (net.Conn, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	if g.DialHook != nil {
		return g.DialHook(ctx, port)
	}
	return nil, pandastack.Errorf(pandastack.ERefused, "nothing accepts connections on port %d in the sandbox (fake)", port)
}
