package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// tmuxSession is a real terminal (tmux, detached, on a private socket)
// running one command; the test types into it and reads its screen.
type tmuxSession struct {
	t    *testing.T
	sock string
}

func newTmux(t *testing.T, cols, rows int, command string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed (scripts/setup installs it)")
	}
	ts := &tmuxSession{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	ts.run("new-session", "-d", "-s", "e2e", "-x", strconv.Itoa(cols), "-y", strconv.Itoa(rows), command)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", ts.sock, "kill-server").Run() })
	return ts
}

func (ts *tmuxSession) run(args ...string) string {
	ts.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", ts.sock}, args...)...).CombinedOutput()
	if err != nil {
		ts.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the terminal shows, with its scrollback.
func (ts *tmuxSession) screen() string {
	return ts.run("capture-pane", "-p", "-J", "-S", "-200", "-t", "e2e")
}

// typeLine types text and Enter, as a user would.
func (ts *tmuxSession) typeLine(text string) {
	ts.run("send-keys", "-t", "e2e", "-l", text)
	ts.run("send-keys", "-t", "e2e", "Enter")
}

// waitScreen waits until the screen contains want.
func (ts *tmuxSession) waitScreen(want string) {
	ts.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(ts.screen(), want) {
		if time.Now().After(deadline) {
			ts.t.Fatalf("the terminal never showed %q; it shows:\n%s", want, ts.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sleeping says whether a `sleep SECONDS` runs in the sandbox.
func sleeping(sb *sdk.Sandbox, seconds string) bool {
	r, err := sb.Exec(context.Background(), "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q 'slee[p] "+seconds+"'", sdk.ExecOptions{})
	return err == nil && r.ExitCode == 0
}

// TestSandboxShellAndWatch drives `pandastack sandbox shell` the way a person does,
// from a real terminal (tmux): a shell prompt in the sandbox, a command and
// its output, the terminal's size and a resize of it, ^C stopping a
// command, and the shell's exit code as the CLI's. Then the Go SDK's
// terminal: a dropped connection, the output made meanwhile replayed on
// reattach, another team kept out, kill. And a directory watch through
// the Go SDK: create, write, rename, remove.
func TestSandboxShellAndWatch(t *testing.T) {
	k, err := main.client(main.admin).CreateKey(context.Background(), "shell-team", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := main.client(k.Key)
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})

	t.Run("cli in a real terminal", func(t *testing.T) {
		cmd := "env PANDASTACK_BASE_URL=" + main.url + " PANDASTACK_API_KEY=" + k.Key + " TERM=xterm " +
			filepath.Join(binDir, "pandastack") + " sandbox shell " + sb.ID + "; echo cli-exit-$?; sleep 600"
		ts := newTmux(t, 100, 30, cmd)
		ts.typeLine("echo hello-$((6*7)) from $(hostname -s 2>/dev/null || echo sandbox)")
		ts.waitScreen("hello-42 from")
		ts.typeLine("stty size")
		ts.waitScreen("30 100")
		ts.run("resize-window", "-t", "e2e", "-x", "120", "-y", "40")
		ts.typeLine("stty size")
		ts.waitScreen("40 120")
		ts.typeLine("sleep 313")
		eventually(t, time.Minute, "sleep to run in the foreground", func() bool { return sleeping(sb, "313") })
		ts.run("send-keys", "-t", "e2e", "C-c")
		ts.typeLine("echo after-ctrl-c-$?")
		ts.waitScreen("after-ctrl-c-130")
		ts.typeLine("exit 5")
		ts.waitScreen("cli-exit-5")
	})

	t.Run("sdk watch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := sb.Exec(ctx, "mkdir -p /tmp/watched", sdk.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := sb.Files().WatchDir(ctx, "/tmp/watched", sdk.WatchOptions{Recursive: true})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		var seen []sdk.FileEvent
		want := func(ev sdk.FileEvent) {
			t.Helper()
			for got := range w.Events {
				seen = append(seen, got)
				if got == ev {
					return
				}
			}
			t.Fatalf("no %+v; saw %+v (err %v)", ev, seen, w.Err())
		}
		run := func(cmd string) {
			t.Helper()
			if r, err := sb.Exec(ctx, cmd, sdk.ExecOptions{}); err != nil || r.ExitCode != 0 {
				t.Fatalf("%s: %v %+v", cmd, err, r)
			}
		}
		if _, err := sb.Files().Write(ctx, "/tmp/watched/sub/a.txt", []byte("1")); err != nil {
			t.Fatal(err)
		}
		want(sdk.FileEvent{Type: "create", Path: "sub", IsDir: true})
		want(sdk.FileEvent{Type: "create", Path: "sub/a.txt"})
		run("echo more >> /tmp/watched/sub/a.txt")
		want(sdk.FileEvent{Type: "write", Path: "sub/a.txt"})
		run("mv /tmp/watched/sub/a.txt /tmp/watched/b.txt")
		want(sdk.FileEvent{Type: "rename", From: "sub/a.txt", Path: "b.txt"})
		run("rm /tmp/watched/b.txt")
		want(sdk.FileEvent{Type: "remove", Path: "b.txt"})
		// Another team cannot watch it.
		other := teamClient(t, "watch-intruder").Sandbox(sb.ID)
		if _, err := other.Files().WatchDir(ctx, "/tmp", sdk.WatchOptions{}); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("another team's watch: %v", err)
		}
		w.Stop()
		if err := w.Err(); err != nil {
			t.Fatalf("stopped watch: %v", err)
		}
	})

	t.Run("sdk reattach", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		term, err := sb.OpenTerminal(ctx, sdk.TerminalOptions{Cmd: "/bin/sh", Rows: 24, Cols: 80, Env: map[string]string{"PS1": "$ "}})
		if err != nil {
			t.Fatal(err)
		}
		var seen bytes.Buffer
		readUntil := func(term *sdk.Terminal, want string) {
			t.Helper()
			buf := make([]byte, 4096)
			for !strings.Contains(seen.String(), want) {
				n, err := term.Read(buf)
				seen.Write(buf[:n])
				if err != nil {
					t.Fatalf("read until %q: %v; output:\n%q", want, err, seen.String())
				}
			}
		}
		io.WriteString(term, "echo one-$((1+1))\n")
		readUntil(term, "one-2")
		// Output made while no client is attached is kept for the reattach.
		io.WriteString(term, "sleep 2; echo while-away-$((3*3))\n")
		readUntil(term, "while-away-$((3*3))\r\n") // the echo of the typed line
		offset := term.Offset()
		term.Close()

		other := teamClient(t, "shell-intruder").Sandbox(sb.ID)
		if _, err := other.ReattachTerminal(ctx, term.SessionID, 0); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("another team reattached: %v", err)
		}
		again, err := sb.ReattachTerminal(ctx, term.SessionID, offset)
		if err != nil {
			t.Fatal(err)
		}
		defer again.Close()
		seen.Reset()
		readUntil(again, "while-away-9")
		io.WriteString(again, "echo two-$((2+2))\n")
		readUntil(again, "two-4")
		if err := again.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, again); err != nil {
			t.Fatal(err)
		}
		res, err := again.Wait()
		if err != nil || res.Signal != "SIGKILL" {
			t.Fatalf("after kill: %+v, %v", res, err)
		}
		if _, err := sb.ReattachTerminal(ctx, term.SessionID, 0); !errors.Is(err, sdk.ErrNotFound) {
			t.Fatalf("reattached to an ended session: %v", err)
		}
	})
}
