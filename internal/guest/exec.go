package guest

import (
	"encoding/json"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// drainIdle is how long output may stay silent after the command exited
// before the agent stops waiting for end of file: a daemon the command left
// behind holds the pipes open, and the command is over all the same.
const drainIdle = 150 * time.Millisecond

// exec runs a command. Foreground: output streams to the host with flow
// control until the command exits; closing the stream kills it. Background:
// the host gets the pid and the output is kept for attach.
func (a *agent) exec(c *guestproto.Conn, req guestproto.Request) error {
	if req.Pty != nil {
		return a.execPty(c, req)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	var inR, inW *os.File
	if req.Stdin && !req.Background {
		inR, inW, err = os.Pipe()
	} else {
		inR, err = os.Open(os.DevNull)
	}
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return err
	}
	p, err := a.procs.start(req, []uintptr{inR.Fd(), outW.Fd(), errW.Fd()})
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return err
	}
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
	if req.Background {
		go func() {
			pump(p, outR, errR, func(typ byte, b []byte) error { p.appendOut(typ, b); return nil })
			p.outMu.Lock()
			p.done = true
			p.outMu.Unlock()
			p.outCnd.Broadcast()
			a.procs.retire(p)
		}()
		if req.Follow {
			return a.follow(c, p)
		}
		return nil
	}
	defer a.procs.finish(p)

	// Host → guest: stdin, signals; the stream closing aborts the command.
	go func() {
		for {
			typ, payload, err := c.Read()
			if err != nil {
				select {
				case <-p.exited:
				default:
					p.kill()
				}
				if inW != nil {
					inW.Close()
				}
				return
			}
			switch typ {
			case guestproto.PktStdin:
				if inW != nil {
					_, _ = inW.Write(payload)
				}
			case guestproto.PktStdinEOF:
				if inW != nil {
					inW.Close()
				}
			case guestproto.PktSignal:
				var s guestproto.Request
				if json.Unmarshal(payload, &s) == nil {
					_ = a.procs.signal(p.pid, s.Signal)
				}
			}
		}
	}()
	var wmu sync.Mutex
	open := true
	pump(p, outR, errR, func(typ byte, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		if !open {
			return io.ErrClosedPipe
		}
		if err := c.Write(typ, b); err != nil {
			p.kill()
			return err
		}
		return nil
	})
	wmu.Lock()
	open = false
	wmu.Unlock()
	return c.WriteJSON(guestproto.PktExit, p.exitInfo())
}

// pump copies a process's stdout and stderr to sink until the process has
// exited and its output is drained (or idle for drainIdle after exit). Pipes
// still held by leftover processes are read and discarded in the background.
func pump(p *proc, outR, errR *os.File, sink func(byte, []byte) error) {
	var last atomic.Int64
	var forward atomic.Bool
	forward.Store(true)
	last.Store(time.Now().UnixNano())
	var mu sync.Mutex // one sink call at a time
	var wg sync.WaitGroup
	readers := make(chan struct{})
	for _, s := range []struct {
		f   *os.File
		typ byte
	}{{outR, guestproto.PktStdout}, {errR, guestproto.PktStderr}} {
		wg.Add(1)
		go func(f *os.File, typ byte) {
			defer wg.Done()
			defer f.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := f.Read(buf)
				if n > 0 && forward.Load() {
					mu.Lock()
					if forward.Load() && sink(typ, buf[:n]) != nil {
						forward.Store(false)
					}
					mu.Unlock()
				}
				last.Store(time.Now().UnixNano())
				if err != nil {
					return
				}
			}
		}(s.f, s.typ)
	}
	go func() { wg.Wait(); close(readers) }()
	<-p.exited
	waitDrained(readers, &last, func() {
		mu.Lock()
		forward.Store(false)
		mu.Unlock()
	})
}

// waitDrained returns when done closes (the output reached its end) or,
// first, when the output has been silent for drainIdle since last, after
// calling stop to stop forwarding what leftover processes still write.
func waitDrained(done <-chan struct{}, last *atomic.Int64, stop func()) {
	tick := time.NewTicker(drainIdle / 3)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if time.Since(time.Unix(0, last.Load())) > drainIdle {
				stop()
				return
			}
		}
	}
}

// retire keeps a finished background process listed for a while, so its
// output and exit status can still be read.
func (t *procTable) retire(p *proc) {
	go func() {
		time.Sleep(30 * time.Minute)
		t.finish(p)
	}()
}

// attach streams a background process's output, from its start (as far as
// kept), then live, then its exit.
func (a *agent) attach(c *guestproto.Conn, req guestproto.Request) error {
	p, err := a.procs.get(req.PID)
	if err != nil {
		return err
	}
	if !p.background {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: "only background processes can be attached"}
	}
	if err := c.WriteJSON(guestproto.PktStarted, guestproto.Started{PID: p.pid}); err != nil {
		return nil
	}
	return a.follow(c, p)
}

// follow streams background process p's output on c, from its start (as
// far as kept), then live, then its exit; c closing ends only the stream.
func (a *agent) follow(c *guestproto.Conn, p *proc) error {
	var gone atomic.Bool
	go func() {
		for {
			if _, _, err := c.Read(); err != nil {
				gone.Store(true)
				p.outCnd.Broadcast()
				return
			}
		}
	}()
	next := 0 // absolute index of the next chunk to send
	for {
		p.outMu.Lock()
		for next >= p.outBase+len(p.out) && !p.done && !gone.Load() {
			p.outCnd.Wait()
		}
		if gone.Load() {
			p.outMu.Unlock()
			return nil
		}
		from := max(next, p.outBase) - p.outBase
		chunks := append([]outChunk(nil), p.out[from:]...)
		next = p.outBase + len(p.out)
		done := p.done
		p.outMu.Unlock()
		for _, ch := range chunks {
			if err := c.Write(ch.typ, ch.data); err != nil {
				return nil
			}
		}
		if done {
			return c.WriteJSON(guestproto.PktExit, p.exitInfo())
		}
	}
}
