package guestimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tailLines is how many of a command's last output lines go into its error.
const tailLines = 15

// command describes one external program run.
type command struct {
	name   string
	args   []string
	dir    string    // working directory; "" for the current one
	env    []string  // nil inherits the environment
	stdin  io.Reader // nil reads from /dev/null
	prefix string    // prefixed to each output line sent to progress
}

// run runs c, streaming its combined output line by line to progress (which
// may be nil). The command runs in its own process group, and cancelling ctx
// kills the whole group, so shell scripts such as debootstrap do not leave
// children behind. A failure's error holds the last lines of output.
func (c command) run(ctx context.Context, progress io.Writer) error {
	_, err := c.output(ctx, progress, false)
	return err
}

// output runs c like run and also returns its standard output when
// captureStdout is set (standard output then does not go to progress).
func (c command) output(ctx context.Context, progress io.Writer, captureStdout bool) ([]byte, error) {
	cmd := exec.CommandContext(ctx, lookTool(c.name), c.args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdin = c.stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Kill the whole process group, not only the leader.
		err := unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		if err == unix.ESRCH {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = 10 * time.Second
	lw := newLineWriter(progress, c.prefix)
	var stdout bytes.Buffer
	if captureStdout {
		cmd.Stdout = &stdout
	} else {
		cmd.Stdout = lw
	}
	cmd.Stderr = lw
	err := cmd.Run()
	lw.Flush()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		msg := fmt.Sprintf("%s %s: %v", c.name, strings.Join(c.args, " "), err)
		if tail := lw.Tail(); tail != "" {
			msg += "; last output:\n" + tail
		}
		return stdout.Bytes(), &cmdError{msg: msg, err: err}
	}
	return stdout.Bytes(), nil
}

// cmdError is a failed command with its output tail; it unwraps to the
// underlying error (an *exec.ExitError or the context's error).
type cmdError struct {
	msg string
	err error
}

func (e *cmdError) Error() string { return e.msg }
func (e *cmdError) Unwrap() error { return e.err }

// lineWriter splits what is written to it into lines, sends each to out with
// a prefix and remembers the last few for error messages.
type lineWriter struct {
	mu     sync.Mutex
	out    io.Writer
	prefix string
	buf    []byte
	cr     bool // a carriage return was the last byte seen
	tail   []string
}

func newLineWriter(out io.Writer, prefix string) *lineWriter {
	if out == nil {
		out = io.Discard
	}
	return &lineWriter{out: out, prefix: prefix}
}

// Write implements io.Writer. A carriage return not followed by a newline
// discards the line so far, as a terminal would overwrite it, so progress
// counters ("Reading database ... 45%") show only their final state.
func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, b := range p {
		switch {
		case b == '\n':
			w.cr = false
			w.emit()
		case b == '\r':
			w.cr = true
		default:
			if w.cr {
				w.cr = false
				w.buf = w.buf[:0]
			}
			w.buf = append(w.buf, b)
		}
	}
	return len(p), nil
}

// Flush sends a final unterminated line, if any.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.emit()
}

func (w *lineWriter) emit() {
	line := strings.TrimRight(string(w.buf), " \t")
	w.buf = w.buf[:0]
	if line == "" {
		return
	}
	// Progress output is best effort: a failing progress writer must not
	// fail the build.
	fmt.Fprintf(w.out, "%s%s\n", w.prefix, line)
	w.tail = append(w.tail, line)
	if len(w.tail) > tailLines {
		w.tail = w.tail[len(w.tail)-tailLines:]
	}
}

// Tail returns the last lines written, joined by newlines.
func (w *lineWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.tail, "\n")
}

// progressf writes one progress line; progress may be nil.
func progressf(progress io.Writer, format string, args ...any) {
	if progress == nil {
		return
	}
	fmt.Fprintf(progress, format+"\n", args...)
}

// sbinDirs are searched for tools after $PATH: a root shell has them in its
// PATH, but a service started with a minimal environment may not.
var sbinDirs = []string{"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"}

// lookTool returns the path of the program name, searched in $PATH and then
// in sbinDirs; if it is in neither, name itself, so that running it fails
// with exec's usual "not found" error.
func lookTool(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range sbinDirs {
		p := d + "/" + name
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return name
}

// haveTool reports whether lookTool finds name.
func haveTool(name string) bool {
	p := lookTool(name)
	return strings.Contains(p, "/")
}
