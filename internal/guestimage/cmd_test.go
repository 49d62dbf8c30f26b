package guestimage

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestLineWriter(t *testing.T) {
	var out bytes.Buffer
	w := newLineWriter(&out, "step: ")
	for _, chunk := range []string{"one\ntw", "o\r\n", "count 1%\rcount 50%\rcount 100%\rdone\n", "\n\nlast"} {
		w.Write([]byte(chunk))
	}
	w.Flush()
	want := "step: one\nstep: two\nstep: done\nstep: last\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
	if w.Tail() != "one\ntwo\ndone\nlast" {
		t.Errorf("tail %q", w.Tail())
	}
}

func TestCommandFailure(t *testing.T) {
	var progress bytes.Buffer
	c := command{name: "sh", args: []string{"-c", "echo out; echo err >&2; exit 3"}, prefix: "sh: "}
	err := c.run(context.Background(), &progress)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Fatalf("error %v, want exit status 3", err)
	}
	if !strings.Contains(err.Error(), "out\nerr") {
		t.Errorf("error %q lacks the output tail", err)
	}
	if progress.String() != "sh: out\nsh: err\n" {
		t.Errorf("progress %q", progress.String())
	}
}

// TestCommandCancel checks that cancelling kills the command's children
// too, not only the process it started.
func TestCommandCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The grandchild holds the output pipe open: if it survived, Run would
	// wait for it (up to WaitDelay).
	c := command{name: "sh", args: []string{"-c", "sleep 30 & sleep 30; wait"}}
	err := c.run(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
}
