package guestconn_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// termReader collects a terminal's output and waits for text in it.
type termReader struct {
	t    *testing.T
	out  chan []byte
	seen bytes.Buffer
	end  chan struct{}
}

func readTerminal(t *testing.T, term pandastack.Terminal) *termReader {
	r := &termReader{t: t, out: make(chan []byte, 64), end: make(chan struct{})}
	go func() {
		defer close(r.end)
		defer close(r.out)
		buf := make([]byte, 4096)
		for {
			n, err := term.Read(buf)
			if n > 0 {
				r.out <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	return r
}

// waitFor reads until the output seen so far contains want.
func (r *termReader) waitFor(want string) {
	r.t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(r.seen.String(), want) {
		select {
		case b, ok := <-r.out:
			if !ok {
				r.t.Fatalf("terminal ended before %q appeared; output:\n%q", want, r.seen.String())
			}
			r.seen.Write(b)
		case <-deadline:
			r.t.Fatalf("%q never appeared; output:\n%q", want, r.seen.String())
		}
	}
}

// waitEnd drains the output until the terminal's end.
func (r *termReader) waitEnd() {
	r.t.Helper()
	for {
		select {
		case b, ok := <-r.out:
			if !ok {
				<-r.end
				return
			}
			r.seen.Write(b)
		case <-time.After(20 * time.Second):
			r.t.Fatalf("terminal did not end; output:\n%q", r.seen.String())
		}
	}
}

// A shell on a real pseudo-terminal: it is a tty of the size asked, typed
// input runs, a resize shows in stty, ^C (a signal to the foreground job)
// stops a command and the shell lives on, and exit's code comes back.
func TestTerminal(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	term, err := cl.Terminal(ctx, pandastack.TerminalRequest{Args: []string{"/bin/sh"}, Rows: 24, Cols: 80, Env: map[string]string{"PS1": "$ "}})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if term.PID() <= 0 {
		t.Fatalf("pid %d", term.PID())
	}
	r := readTerminal(t, term)
	io.WriteString(term, "tty; stty size; echo mark-$((6*7))\n")
	r.waitFor("mark-42")
	if !strings.Contains(r.seen.String(), "/dev/pts/") || !strings.Contains(r.seen.String(), "24 80") {
		t.Fatalf("not a 24x80 tty:\n%q", r.seen.String())
	}
	if err := term.Resize(ctx, 40, 132); err != nil {
		t.Fatal(err)
	}
	io.WriteString(term, "stty size\n")
	r.waitFor("40 132")

	io.WriteString(term, "sleep 313\n")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		res, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q 'slee[p] 313'"}, nil, func(pandastack.ExecEvent) error { return nil })
		if err == nil && res.ExitCode == 0 {
			break // sleep runs in the terminal's foreground
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep never started")
		}
	}
	if err := term.Signal(ctx, "INT"); err != nil {
		t.Fatal(err)
	}
	io.WriteString(term, "echo after-sleep-$?\n")
	r.waitFor("after-sleep-130")

	io.WriteString(term, "exit 7\n")
	r.waitEnd()
	res, err := term.Wait()
	if err != nil || res.ExitCode != 7 {
		t.Fatalf("exit = %+v, %v", res, err)
	}
}

// Raw bytes pass both ways unaltered by the host side; the terminal's own
// line discipline echoes input and turns \n into \r\n, as a terminal does.
func TestTerminalRawAndKill(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	term, err := cl.Terminal(ctx, pandastack.TerminalRequest{Cmd: "printf 'caf\\303\\251\\n'; exec cat", Rows: 10, Cols: 40})
	if err != nil {
		t.Fatal(err)
	}
	r := readTerminal(t, term)
	r.waitFor("café\r\n")
	io.WriteString(term, "typed\n")
	r.waitFor("typed\r\ntyped\r\n") // the echo, then cat's copy
	if err := term.Signal(ctx, "KILL"); err != nil {
		t.Fatal(err)
	}
	r.waitEnd()
	res, err := term.Wait()
	if err != nil || res.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v, %v", res, err)
	}
}

func TestTerminalErrors(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  pandastack.TerminalRequest
		code string
	}{
		{"zero size", pandastack.TerminalRequest{Rows: 0, Cols: 80}, pandastack.EInvalid},
		{"huge size", pandastack.TerminalRequest{Rows: 24, Cols: 100000}, pandastack.EInvalid},
		{"cmd and args", pandastack.TerminalRequest{Cmd: "sh", Args: []string{"sh"}, Rows: 24, Cols: 80}, pandastack.EInvalid},
		{"no such program", pandastack.TerminalRequest{Args: []string{"/no/such"}, Rows: 24, Cols: 80}, pandastack.ENotFound},
		{"no such user", pandastack.TerminalRequest{User: "nobody-here", Rows: 24, Cols: 80}, pandastack.EInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cl.Terminal(ctx, tc.req)
			var pe *pandastack.Error
			if !errors.As(err, &pe) || pe.Code != tc.code {
				t.Fatalf("err = %v, want code %s", err, tc.code)
			}
		})
	}
	// Closing a terminal kills its command; the session stays usable.
	term, err := cl.Terminal(ctx, pandastack.TerminalRequest{Args: []string{"sleep", "300"}, Rows: 5, Cols: 5})
	if err != nil {
		t.Fatal(err)
	}
	pid := term.PID()
	term.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, err := cl.Processes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		running := false
		for _, p := range ps {
			running = running || (p.PID == pid && p.Running)
		}
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after Close", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vmRSS is a process's resident memory in KiB.
func vmRSS(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A terminal nobody reads does not grow the agent's memory: the stream's
// flow control stops the output, and the program blocks on its terminal.
func TestTerminalUnreadIsBounded(t *testing.T) {
	c, cmd := startAgent(t)
	ctx := context.Background()
	cl, _, err := c.Handshake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	term, err := cl.Terminal(ctx, pandastack.TerminalRequest{Cmd: "yes terminal-output-that-nobody-reads", Rows: 24, Cols: 80})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	before := vmRSS(t, cmd.Process.Pid)
	// yes writes as fast as it can; give it time to have written far more
	// than the bound below if anything buffered it.
	time.Sleep(2 * time.Second)
	if after := vmRSS(t, cmd.Process.Pid); after-before > 16<<10 {
		t.Fatalf("the agent grew from %d KiB to %d KiB while a terminal went unread", before, after)
	}
	// And the output is all there to read once someone does.
	buf := make([]byte, 4096)
	n, err := io.ReadAtLeast(term, buf, 100)
	if err != nil || !strings.Contains(string(buf[:n]), "terminal-output-that-nobody-reads") {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}
