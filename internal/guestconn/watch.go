package guestconn

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
)

// WatchDir reports changes under a directory to fn until ctx ends (then it
// returns nil) or fn fails. start, if not nil, is called once the watch is
// in place: a change made after it is reported.
func (c *Client) WatchDir(ctx context.Context, path string, recursive bool, start func() error, fn func(pandastack.FileEvent) error) error {
	gc, done, err := c.open(ctx, guestproto.Request{Op: guestproto.OpWatch, Path: path, Recursive: recursive})
	if err != nil {
		return err
	}
	defer done()
	if err := gc.ReadJSON(guestproto.PktOK, nil); err != nil {
		return c.mapErr(ctx, err)
	}
	if start != nil {
		if err := start(); err != nil {
			return err
		}
	}
	for {
		typ, p, err := gc.Read()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return c.mapErr(ctx, fmt.Errorf("read watch events: %w", err))
		}
		switch typ {
		case guestproto.PktData:
			var ev guestproto.WatchEvent
			if err := json.Unmarshal(p, &ev); err != nil {
				return fmt.Errorf("decode watch event: %w", err)
			}
			if err := fn(pandastack.FileEvent{Type: ev.Type, Path: ev.Path, From: ev.From, IsDir: ev.IsDir}); err != nil {
				return err
			}
		case guestproto.PktError:
			var ge guestproto.Error
			_ = json.Unmarshal(p, &ge)
			return c.mapErr(ctx, &ge)
		}
	}
}
