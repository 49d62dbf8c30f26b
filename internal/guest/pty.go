package guest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// A terminal is the master side of a Linux pseudo-terminal, opened with
// x/sys/unix: /dev/ptmx, unlocked, its slave /dev/pts/N opened by number.
// Nothing here needs a library of its own, and the agent's imports stay
// pinned (imports_test.go).

// openPty returns a new terminal's master and slave, sized ws.
func openPty(ws guestproto.Winsize) (master, slave *os.File, err error) {
	// Non-blocking, so the master is read through the runtime's poller and
	// closing it ends a pending read. (Its Fd method would make it blocking
	// again: ioctls use rawFd.)
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(mfd), "/dev/ptmx")
	fail := func(what string, err error) (*os.File, *os.File, error) {
		master.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return fail("unlock pty", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return fail("pty number", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open "+name, err)
	}
	slave = os.NewFile(uintptr(sfd), name)
	if err := setWinsize(master, ws); err != nil {
		slave.Close()
		return fail("size pty", err)
	}
	return master, slave, nil
}

// setWinsize sizes the terminal; the kernel sends SIGWINCH to its
// foreground process group when the size changes.
func setWinsize(master *os.File, ws guestproto.Winsize) error {
	if ws.Rows == 0 || ws.Cols == 0 {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("terminal size %dx%d: rows and cols must be at least 1", ws.Cols, ws.Rows)}
	}
	return rawFd(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: ws.Rows, Col: ws.Cols})
	})
}

// rawFd runs fn on f's descriptor without taking it out of the poller.
func rawFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// loginShell is the argv of the user's login shell.
func loginShell(u guestUser) []string {
	sh := u.shell
	if st, err := os.Stat(sh); sh == "" || err != nil || st.IsDir() {
		sh = "/bin/sh"
	}
	return []string{sh, "-l"}
}

// execPty runs a command on a new pseudo-terminal, in the foreground of
// the stream: output (the terminal's bytes) flows to the host with the
// stream's flow control, so a host that stops reading stops the process's
// writes once the kernel's terminal buffer is full instead of growing one
// here. Closing the stream kills the command, as for exec.
func (a *agent) execPty(c *guestproto.Conn, req guestproto.Request) error {
	if req.Background {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: "a terminal runs in the foreground of its stream, not in the background"}
	}
	if req.Pty.Rows == 0 || req.Pty.Cols == 0 {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("terminal size %dx%d: rows and cols must be at least 1", req.Pty.Cols, req.Pty.Rows)}
	}
	master, slave, err := openPty(*req.Pty)
	if err != nil {
		return err
	}
	fd := slave.Fd()
	p, err := a.procs.start(req, []uintptr{fd, fd, fd})
	slave.Close()
	if err != nil {
		master.Close()
		return err
	}
	defer a.procs.finish(p)
	if req.TimeoutMs > 0 {
		t := time.AfterFunc(time.Duration(req.TimeoutMs)*time.Millisecond, func() {
			p.timedOut = true
			p.kill()
		})
		go func() { <-p.exited; t.Stop() }()
	}
	if err := c.WriteJSON(guestproto.PktStarted, guestproto.Started{PID: p.pid}); err != nil {
		p.kill()
	}
	// The master is closed once both the input loop and the output pump are
	// done with it.
	var users sync.WaitGroup
	users.Add(2)
	go func() { users.Wait(); master.Close() }()

	// Host → guest: typed input, resizes, signals; the stream closing
	// aborts the command.
	go func() {
		defer users.Done()
		for {
			typ, payload, err := c.Read()
			if err != nil {
				select {
				case <-p.exited:
				default:
					p.kill()
				}
				return
			}
			switch typ {
			case guestproto.PktStdin:
				_, _ = master.Write(payload)
			case guestproto.PktStdinEOF:
				_, _ = master.Write([]byte{4}) // ^D, as typed
			case guestproto.PktResize:
				var ws guestproto.Winsize
				if json.Unmarshal(payload, &ws) == nil {
					_ = setWinsize(master, ws)
				}
			case guestproto.PktSignal:
				var s guestproto.Request
				if json.Unmarshal(payload, &s) == nil {
					_ = a.signalTerminal(p, master, s.Signal)
				}
			}
		}
	}()
	var wmu sync.Mutex
	open := true
	ptyPump(p, master, func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		if !open {
			return os.ErrClosed
		}
		if err := c.Write(guestproto.PktStdout, b); err != nil {
			p.kill()
			return err
		}
		return nil
	})
	users.Done()
	wmu.Lock()
	open = false
	wmu.Unlock()
	return c.WriteJSON(guestproto.PktExit, p.exitInfo())
}

// signalTerminal sends a signal to the terminal's foreground process group
// (what ^C reaches: the command the shell runs, not only the shell); KILL
// ends the whole tree.
func (a *agent) signalTerminal(p *proc, master *os.File, name string) error {
	sig, err := parseSignal(name)
	if err != nil {
		return err
	}
	if sig == syscall.SIGKILL {
		p.kill()
		return nil
	}
	pgrp := 0
	err = rawFd(master, func(fd int) (err error) { pgrp, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP); return err })
	if err != nil || pgrp <= 0 {
		pgrp = p.pid
	}
	if err := syscall.Kill(-pgrp, sig); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// ptyPump copies the terminal's output to sink until the process has
// exited and the output is drained: a read of the master fails (EIO) once
// no process holds the slave open, or, when a process the command left
// behind still does, after drainIdle of silence.
func ptyPump(p *proc, master *os.File, sink func([]byte) error) {
	var last atomic.Int64
	var forward atomic.Bool
	forward.Store(true)
	last.Store(time.Now().UnixNano())
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			if n > 0 && forward.Load() {
				mu.Lock()
				if forward.Load() && sink(buf[:n]) != nil {
					forward.Store(false)
				}
				mu.Unlock()
			}
			last.Store(time.Now().UnixNano())
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-done:
		<-p.exited
		return
	case <-p.exited:
	}
	waitDrained(done, &last, func() {
		mu.Lock()
		forward.Store(false)
		mu.Unlock()
	})
}
