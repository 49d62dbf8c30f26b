package guest

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// proc is a command the agent started.
type proc struct {
	pid        int
	args       []string
	background bool
	started    time.Time
	cgroup     string // directory, "" when cgroups are unavailable
	exited     chan struct{}
	status     syscall.WaitStatus
	timedOut   bool

	// output of background processes, for attach
	outMu   sync.Mutex
	outCnd  *sync.Cond
	out     []outChunk
	outLen  int
	outBase int  // chunks dropped from the front
	done    bool // output drained and process exited
}

type outChunk struct {
	typ  byte
	data []byte
}

// maxBackgroundOutput bounds what a background process keeps for attach;
// older output is dropped first.
const maxBackgroundOutput = 8 << 20

func (p *proc) appendOut(typ byte, b []byte) {
	p.outMu.Lock()
	p.out = append(p.out, outChunk{typ, append([]byte(nil), b...)})
	p.outLen += len(b)
	for p.outLen > maxBackgroundOutput && len(p.out) > 1 {
		p.outLen -= len(p.out[0].data)
		p.out = p.out[1:]
		p.outBase++
	}
	p.outMu.Unlock()
	p.outCnd.Broadcast()
}

// kill stops the whole process tree: the cgroup when there is one, the
// process group otherwise.
func (p *proc) kill() {
	if p.cgroup != "" {
		if err := os.WriteFile(filepath.Join(p.cgroup, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}

func (p *proc) exitInfo() guestproto.Exit {
	e := guestproto.Exit{DurationMs: float64(time.Since(p.started).Microseconds()) / 1000, TimedOut: p.timedOut}
	switch {
	case p.status.Exited():
		e.ExitCode = p.status.ExitStatus()
	case p.status.Signaled():
		e.ExitCode = 128 + int(p.status.Signal())
		e.Signal = unix.SignalName(p.status.Signal())
	}
	return e
}

// procTable tracks the agent's children. As PID 1 the agent reaps every
// process in the VM, so it owns waiting: nothing else calls wait.
type procTable struct {
	mu      sync.Mutex
	procs   map[int]*proc
	cgOK    bool
	cgSeq   atomic.Int64
	cgReady chan string // cgroups made ahead, so an exec does not wait for mkdir
	cgFill  atomic.Bool
}

func newProcTable() *procTable {
	_, err := os.Stat(cgroupRoot)
	t := &procTable{procs: map[int]*proc{}, cgOK: err == nil && os.Getpid() == 1, cgReady: make(chan string, 8)}
	if t.cgOK {
		t.fillCgroups()
	}
	return t
}

// takeCgroup returns an empty cgroup for a new command.
func (t *procTable) takeCgroup() string {
	select {
	case cg := <-t.cgReady:
		return cg
	default:
		return t.makeCgroup()
	}
}

func (t *procTable) makeCgroup() string {
	cg := filepath.Join(cgroupRoot, "c"+strconv.FormatInt(t.cgSeq.Add(1), 10))
	if err := os.Mkdir(cg, 0o755); err != nil {
		return ""
	}
	return cg
}

// fillCgroups tops up the ready cgroups; a snapshot keeps them, so the first
// command after a restore finds one.
func (t *procTable) fillCgroups() {
	if !t.cgFill.CompareAndSwap(false, true) {
		return
	}
	defer t.cgFill.Store(false)
	for len(t.cgReady) < cap(t.cgReady)/2 {
		cg := t.makeCgroup()
		if cg == "" {
			return
		}
		t.cgReady <- cg
	}
}

// reapSafetyNet is how often reap looks for exited children without a
// SIGCHLD. Every child's exit sends one and reapOnce collects all that
// exited, so this only guards against the unforeseen; it is long because
// an idle guest must not wake up (each wakeup costs the host CPU, under
// TCG most of all: see qemu.KernelCmdline).
const reapSafetyNet = time.Minute

// reap collects exit statuses forever.
func (t *procTable) reap() {
	ch := make(chan os.Signal, 64)
	signal.Notify(ch, syscall.SIGCHLD)
	safety := time.NewTicker(reapSafetyNet)
	defer safety.Stop()
	for {
		t.reapOnce()
		select {
		case <-ch:
		case <-safety.C:
		}
	}
}

func (t *procTable) reapOnce() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		t.mu.Lock()
		p := t.procs[pid]
		t.mu.Unlock()
		if p != nil {
			p.status = ws
			close(p.exited)
		}
	}
}

// waitChild is used when the agent is not PID 1 (tests): each child is waited
// for directly.
func (t *procTable) waitChild(p *proc) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(p.pid, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		break
	}
	p.status = ws
	close(p.exited)
}

// start runs a command. files are the child's stdin, stdout and stderr.
func (t *procTable) start(req guestproto.Request, files []uintptr) (*proc, error) {
	u, err := lookupUser(req.User)
	if err != nil {
		return nil, err
	}
	env := baseEnv(u)
	for k, v := range req.Env {
		env = setEnv(env, k, v)
	}
	if req.Shell != "" {
		req.Args = shellArgs(req.Shell, env)
	} else if len(req.Args) == 0 && req.Pty != nil {
		req.Args = loginShell(u)
	}
	if len(req.Args) == 0 {
		return nil, &guestproto.Error{Code: guestproto.ErrInvalid, Message: "no command given"}
	}
	dir := req.Cwd
	if dir == "" {
		dir = u.home
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			dir = "/"
		}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, &guestproto.Error{Code: guestproto.ErrNotFound, Message: fmt.Sprintf("working directory %s does not exist", dir)}
	}
	argv0, err := lookPath(req.Args[0], env)
	if err != nil {
		return nil, err
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: env, Files: files, Sys: &syscall.SysProcAttr{Setpgid: true}}
	if req.Pty != nil {
		// Its own session with the terminal (its fd 0) as controlling tty:
		// job control, ^C and SIGWINCH work as on a login.
		attr.Sys = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
	if os.Getuid() == 0 && (u.uid != 0 || u.gid != 0) {
		attr.Sys.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: u.groups}
	}
	p := &proc{args: req.Args, background: req.Background, started: time.Now(), exited: make(chan struct{})}
	p.outCnd = sync.NewCond(&p.outMu)
	var cg string
	if t.cgOK {
		cg = t.takeCgroup()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if cg != "" {
		if fd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0); err == nil {
			defer syscall.Close(fd)
			attr.Sys.UseCgroupFD = true
			attr.Sys.CgroupFD = fd
			p.cgroup = cg
		}
	}
	pid, err := syscall.ForkExec(argv0, req.Args, attr)
	if err != nil {
		if cg != "" {
			_ = os.Remove(cg)
		}
		return nil, &guestproto.Error{Code: errCode(err), Message: fmt.Sprintf("start %s: %v", req.Args[0], err)}
	}
	p.pid = pid
	t.procs[pid] = p
	if os.Getpid() != 1 {
		go t.waitChild(p)
	}
	return p, nil
}

// finish forgets a process once nobody needs its status any more.
func (t *procTable) finish(p *proc) {
	if t.cgOK {
		go t.fillCgroups() // after the command, not while it starts
	}
	if p.cgroup != "" {
		// Leftover daemons keep the cgroup busy; it is removed when they go.
		go func() {
			for i := 0; i < 600; i++ {
				if os.Remove(p.cgroup) == nil {
					return
				}
				time.Sleep(time.Second)
			}
		}()
	}
	t.mu.Lock()
	if t.procs[p.pid] == p {
		delete(t.procs, p.pid)
	}
	t.mu.Unlock()
}

func (t *procTable) get(pid int) (*proc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.procs[pid]
	if p == nil {
		return nil, &guestproto.Error{Code: guestproto.ErrNotFound, Message: fmt.Sprintf("process %d not found", pid)}
	}
	return p, nil
}

// procInfo is one row of a process listing.
type procInfo struct {
	PID        int       `json:"pid"`
	Args       []string  `json:"args"`
	Background bool      `json:"background"`
	Running    bool      `json:"running"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	StartedAt  time.Time `json:"started_at"`
}

func (t *procTable) list() []procInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []procInfo{}
	for _, p := range t.procs {
		pi := procInfo{PID: p.pid, Args: p.args, Background: p.background, Running: true, StartedAt: p.started}
		select {
		case <-p.exited:
			pi.Running = false
			code := p.exitInfo().ExitCode
			pi.ExitCode = &code
		default:
		}
		out = append(out, pi)
	}
	return out
}

func (t *procTable) signal(pid int, name string) error {
	p, err := t.get(pid)
	if err != nil {
		return err
	}
	sig, err := parseSignal(name)
	if err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		p.kill()
		return nil
	}
	if err := syscall.Kill(-p.pid, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// parseSignal accepts "SIGTERM", "TERM", "term" or "15".
func parseSignal(name string) (syscall.Signal, error) {
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	up := strings.ToUpper(name)
	if !strings.HasPrefix(up, "SIG") {
		up = "SIG" + up
	}
	if s := unix.SignalNum(up); s != 0 {
		return s, nil
	}
	return 0, &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("unknown signal %q", name)}
}
