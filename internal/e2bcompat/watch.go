package e2bcompat

import (
	"context"
	"net/http"
	"path"
	"time"

	"github.com/pandastack/pandastack"
)

// WatchDir rides on the guest agent's directory watch (inotify, see
// pandastack.Guest.WatchDir): events arrive as they happen, not by polling.
// A rename is envd's pair: RENAME of the old name, CREATE of the new.

type watchRequest struct {
	Path         string `json:"path"`
	Recursive    bool   `json:"recursive"`
	IncludeEntry bool   `json:"includeEntry"`
}

type fsEvent struct {
	Name  string     `json:"name"`
	Type  string     `json:"type"`
	Entry *entryInfo `json:"entry,omitempty"`
}

type watchMsg struct {
	Start      *struct{} `json:"start,omitempty"`
	Filesystem *fsEvent  `json:"filesystem,omitempty"`
	Keepalive  *struct{} `json:"keepalive,omitempty"`
}

// envdEvents turns one of our file events into envd's.
func envdEvents(ev pandastack.FileEvent) []*fsEvent {
	switch ev.Type {
	case "create":
		return []*fsEvent{{Name: ev.Path, Type: "EVENT_TYPE_CREATE"}}
	case "write":
		return []*fsEvent{{Name: ev.Path, Type: "EVENT_TYPE_WRITE"}}
	case "remove":
		return []*fsEvent{{Name: ev.Path, Type: "EVENT_TYPE_REMOVE"}}
	case "chmod":
		return []*fsEvent{{Name: ev.Path, Type: "EVENT_TYPE_CHMOD"}}
	case "rename":
		return []*fsEvent{{Name: ev.From, Type: "EVENT_TYPE_RENAME"}, {Name: ev.Path, Type: "EVENT_TYPE_CREATE"}}
	}
	return nil // overflow: envd has no such event
}

// fsWatchDir: filesystem.Filesystem/WatchDir (server-streaming). The
// Connect-Timeout-Ms header bounds it.
func (s *Server) fsWatchDir(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req watchRequest
	if e := readEnvelope(r, &req); e != nil {
		newStream(w).end(e)
		return
	}
	root := resolvePath(req.Path, rpcUser(r))
	ctx := r.Context()
	if sec := connectTimeout(r); sec > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(sec*float64(time.Second)))
		defer cancel()
	}
	var st *stream
	stop := make(chan struct{})
	defer close(stop)
	err := c.guest.WatchDir(ctx, root, req.Recursive, func() error {
		st = newStream(w)
		if err := st.send(watchMsg{Start: &struct{}{}}); err != nil {
			return err
		}
		go st.keepalive(r, watchMsg{Keepalive: &struct{}{}}, stop)
		return nil
	}, func(ev pandastack.FileEvent) error {
		for _, fe := range envdEvents(ev) {
			if req.IncludeEntry && fe.Type != "EVENT_TYPE_REMOVE" && fe.Type != "EVENT_TYPE_RENAME" {
				if fi, err := c.guest.Stat(ctx, path.Join(root, fe.Name)); err == nil {
					e := toEntry(fi)
					fe.Entry = &e
				}
			}
			if err := st.send(watchMsg{Filesystem: fe}); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case st == nil:
		if err == nil {
			err = ctx.Err()
		}
		newStream(w).end(toRPCError(err))
	case err != nil && r.Context().Err() == nil:
		st.end(toRPCError(err))
	case err == nil && r.Context().Err() == nil:
		st.end(nil) // the watch's own deadline
	}
}
