package hostagent

import (
	"context"
	"maps"
	"sync"

	"github.com/pandastack/pandastack"
)

// Terminal starts a command on a pseudo-terminal with the sandbox's env and
// the template's defaults, as Exec does; the sandbox is busy (no
// auto-hibernate) while the terminal is open.
func (g *guest) Terminal(ctx context.Context, req pandastack.TerminalRequest) (pandastack.Terminal, error) {
	release := g.s.hold()
	if req.Cwd == "" {
		req.Cwd = g.workdir
	}
	if req.User == "" {
		req.User = g.user
	}
	if len(g.env) > 0 {
		env := maps.Clone(g.env)
		maps.Copy(env, req.Env)
		req.Env = env
	}
	t, err := g.Client.Terminal(ctx, req)
	if err != nil {
		release()
		return nil, err
	}
	return &busyTerminal{Terminal: t, release: release}, nil
}

// busyTerminal releases the sandbox when its terminal ends or is closed.
type busyTerminal struct {
	pandastack.Terminal
	release func()
	once    sync.Once
}

func (t *busyTerminal) Read(p []byte) (int, error) {
	n, err := t.Terminal.Read(p)
	if err != nil {
		t.once.Do(t.release)
	}
	return n, err
}

func (t *busyTerminal) Close() error {
	t.once.Do(t.release)
	return t.Terminal.Close()
}

// WatchDir holds the sandbox busy while the watch runs.
func (g *guest) WatchDir(ctx context.Context, path string, recursive bool, start func() error, fn func(pandastack.FileEvent) error) error {
	defer g.s.hold()()
	return g.Client.WatchDir(ctx, path, recursive, start, fn)
}
