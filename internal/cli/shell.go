package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// runSandboxShell opens an interactive terminal in a sandbox: this
// terminal goes raw (golang.org/x/term) so every key reaches the sandbox,
// its size follows this one (SIGWINCH), and the program exits with the
// command's exit code.
func runSandboxShell(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox shell", "ID",
		"Open an interactive terminal in a sandbox: the user's login shell, or --cmd. Keys, ^C\n"+
			"and resizes reach the sandbox; exit the shell to end. A dropped connection reattaches\n"+
			"by itself (the session waits a minute for it).").withClient(ctx)
	cmd := p.fs.String("cmd", "", "run `CMD` (a command line) instead of the login shell")
	user := p.fs.String("user", "", "run as `USER`")
	cwd := p.fs.String("cwd", "", "working `DIR` (absolute)")
	env := kvFlag{}
	p.fs.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	opts := sdk.TerminalOptions{Cmd: *cmd, User: *user, Cwd: *cwd, Env: env, Rows: 24, Cols: 80}
	if v := os.Getenv("TERM"); v != "" && env["TERM"] == "" {
		opts.Env = map[string]string{"TERM": v}
		for k, v := range env {
			opts.Env[k] = v
		}
	}
	in, _ := s.in.(*os.File)
	tty := in != nil && term.IsTerminal(int(in.Fd()))
	if tty {
		if w, h, err := term.GetSize(int(in.Fd())); err == nil && w > 0 && h > 0 {
			opts.Rows, opts.Cols = h, w
		}
	}
	t, err := p.client.client().Sandbox(pos[0]).OpenTerminal(ctx, opts)
	if err != nil {
		return fail(s, err)
	}
	defer t.Close()
	if tty {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fail(s, fmt.Errorf("put the terminal in raw mode: %w", err))
		}
		defer term.Restore(int(in.Fd()), old)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				if w, h, err := term.GetSize(int(in.Fd())); err == nil {
					_ = t.Resize(ctx, h, w)
				}
			}
		}()
	}
	go func() {
		_, _ = io.Copy(t, s.in)
		if !tty {
			// End of piped input: end of the terminal's input, as ^D.
			_, _ = t.Write([]byte{4})
		}
	}()
	if _, err := io.Copy(s.out, t); err != nil {
		if tty {
			fmt.Fprint(s.out, "\r\n")
		}
		return fail(s, err)
	}
	res, err := t.Wait()
	if err != nil {
		return fail(s, err)
	}
	if res.TimedOut {
		fmt.Fprintln(s.err, "pandastack: the terminal's command timed out and was killed")
	}
	if res.ExitCode < 0 || res.ExitCode > 255 {
		return 255
	}
	return res.ExitCode
}
