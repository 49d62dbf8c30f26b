package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/pandastack/pandastack"
)

// watchLine is one NDJSON line of a directory watch: {"type":"start"}
// once the watch is in place, then one line per change (FileEvent), and
// {"type":"error"} if the watch fails after it started.
type watchLine struct {
	pandastack.FileEvent
	Error *pandastack.Error `json:"error,omitempty"`
}

// watchDir streams changes under a directory as NDJSON until the client
// goes away, timeout_seconds passes (the stream then ends cleanly) or the
// directory is removed.
func (s *Server) watchDir(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	recursive := false
	if v := q.Get("recursive"); v != "" {
		if recursive, err = strconv.ParseBool(v); err != nil {
			return invalid("recursive must be true or false, not %q", v)
		}
	}
	ctx := r.Context()
	if v := q.Get("timeout_seconds"); v != "" {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || sec <= 0 || sec != sec {
			return invalid("timeout_seconds must be a positive number of seconds, not %q", v)
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(sec*float64(time.Second)))
		defer cancel()
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	out := newNDJSON(w)
	err = g.WatchDir(ctx, p, recursive, func() error {
		return out.Send(watchLine{FileEvent: pandastack.FileEvent{Type: "start"}})
	}, func(ev pandastack.FileEvent) error {
		return out.Send(watchLine{FileEvent: ev})
	})
	switch {
	case err == nil:
		return nil
	case !out.Started():
		return wrap(err, "watch "+p)
	case r.Context().Err() != nil:
		return nil // the client went away
	}
	_ = out.Send(watchLine{FileEvent: pandastack.FileEvent{Type: "error"}, Error: s.wireError(r, err)})
	return nil
}
