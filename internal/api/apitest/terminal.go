package apitest

import (
	"context"

	"github.com/pandastack/pandastack"
)

// Terminal: the FAKE guest has no pseudo-terminals (the real ones are tested
// against the real guest agent: guestconn and e2e tests).
func (g *Guest) Terminal(ctx context.Context, req pandastack.TerminalRequest) (pandastack.Terminal, error) {
	if err := pandastack.CheckTerminalSize(req.Rows, req.Cols); err != nil {
		return nil, err
	}
	return nil, pandastack.Errorf(pandastack.EUnavailable, "the fake guest has no terminals")
}

// WatchDir: the FAKE guest's files do not change behind its back.
func (g *Guest) WatchDir(ctx context.Context, path string, recursive bool, start func() error, fn func(pandastack.FileEvent) error) error {
	return pandastack.Errorf(pandastack.EUnavailable, "the fake guest has no directory watches")
}
