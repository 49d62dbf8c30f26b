package databases

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// Where PostgreSQL 17's programs and its socket are in a database's
// machine.
const (
	pgBin       = "/usr/lib/postgresql/17/bin"
	pgSocketDir = "/var/run/postgresql"
)

// streamOut runs args as root in machine id, handing its standard output
// to consume as a stream; it returns the standard error. A non-zero exit,
// or consume failing, is an error carrying the standard error's end.
func (s *Service) streamOut(ctx context.Context, machineID string, timeout time.Duration, consume func(io.Reader) error, args ...string) (string, error) {
	g, err := s.cfg.Engine.Guest(ctx, machineID)
	if err != nil {
		return "", err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := consume(pr)
		pr.CloseWithError(err) // a writer still writing stops
		done <- err
	}()
	var stderr strings.Builder
	res, err := g.Exec(ctx, pandastack.ExecRequest{Args: args, User: "root", Cwd: "/", TimeoutSeconds: timeout.Seconds()}, nil,
		func(ev pandastack.ExecEvent) error {
			switch ev.Type {
			case "stdout":
				_, err := pw.Write(ev.Data)
				return err
			case "stderr":
				if stderr.Len() < 16<<10 {
					stderr.Write(ev.Data)
				}
			}
			return nil
		})
	if err == nil && (res.ExitCode != 0 || res.TimedOut) {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, tail(stderr.String(), 400))
	}
	pw.CloseWithError(err) // nil: the reader sees the end
	if cerr := <-done; err == nil && cerr != nil {
		err = cerr
	}
	return stderr.String(), err
}

// tail is the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// shorten is the first n bytes of s.
func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// execIn runs args as root in machine id with stdin (nil: none) for at
// most timeout, and returns its output (its start); a non-zero exit is an
// error carrying the output's end.
func (s *Service) execIn(ctx context.Context, machineID string, timeout time.Duration, stdin io.Reader, args ...string) (string, error) {
	g, err := s.cfg.Engine.Guest(ctx, machineID)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	res, err := g.Exec(ctx, pandastack.ExecRequest{Args: args, User: "root", Cwd: "/", TimeoutSeconds: timeout.Seconds()}, stdin, func(ev pandastack.ExecEvent) error {
		if (ev.Type == "stdout" || ev.Type == "stderr") && out.Len() < 8192 {
			out.Write(ev.Data)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || res.TimedOut {
		return "", fmt.Errorf("exit %d: %s", res.ExitCode, tail(out.String(), 1200))
	}
	return out.String(), nil
}
