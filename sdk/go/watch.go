package pandastack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
)

// FileEvent is one change under a watched directory. Path, and From for a
// rename, are relative to it. Type is "create", "write", "remove",
// "rename", "chmod", or "overflow" (events were lost: list it again).
type FileEvent struct {
	Type  string `json:"type"`
	Path  string `json:"path,omitempty"`
	From  string `json:"from,omitempty"`
	IsDir bool   `json:"is_dir,omitempty"`
}

// WatchOptions tunes WatchDir.
type WatchOptions struct {
	Recursive bool
	// TimeoutSeconds ends the watch (without error) after this long; 0: it
	// lasts until ctx ends.
	TimeoutSeconds float64
}

// Watch is a running directory watch (GET .../files/watch).
type Watch struct {
	// Events delivers the changes; it is closed when the watch ends.
	Events <-chan FileEvent
	body   io.Closer
	err    error
	done   chan struct{}
	stop   chan struct{}
}

// WatchDir starts watching a directory; it returns once the watch is in
// place, so a change made after it is reported. Stop it with Stop or by
// ending ctx.
func (f *Filesystem) WatchDir(ctx context.Context, path string, o WatchOptions) (*Watch, error) {
	q := url.Values{"path": {path}}
	if o.Recursive {
		q.Set("recursive", "true")
	}
	if o.TimeoutSeconds > 0 {
		q.Set("timeout_seconds", strconv.FormatFloat(o.TimeoutSeconds, 'f', -1, 64))
	}
	resp, err := f.s.c.send(ctx, request{method: "GET", path: f.s.path("/files/watch"), query: q, accept: ndjsonType})
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(resp.Body)
	var first struct {
		FileEvent
		Error *APIError `json:"error"`
	}
	if err := dec.Decode(&first); err != nil || first.Type != "start" {
		resp.Body.Close()
		return nil, fmt.Errorf("pandastack: watch %s: the stream did not start (%v)", path, err)
	}
	events := make(chan FileEvent, 64)
	w := &Watch{Events: events, body: resp.Body, done: make(chan struct{}), stop: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer close(events)
		defer resp.Body.Close()
		for {
			var line struct {
				FileEvent
				Error *struct{ Code, Message string } `json:"error"`
			}
			if err := dec.Decode(&line); err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil && !w.stopped() {
					w.err = fmt.Errorf("pandastack: watch %s: %w", path, err)
				}
				return
			}
			if line.Type == "error" && line.Error != nil {
				w.err = &APIError{Code: line.Error.Code, Message: line.Error.Message}
				return
			}
			select {
			case events <- line.FileEvent:
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			}
		}
	}()
	return w, nil
}

func (w *Watch) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// Stop ends the watch.
func (w *Watch) Stop() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.body.Close()
	<-w.done
}

// Err is why the watch ended (after Events is closed): nil when it was
// stopped or timed out.
func (w *Watch) Err() error {
	<-w.done
	return w.err
}
