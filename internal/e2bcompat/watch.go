package e2bcompat

import (
	"context"
	"net/http"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// The guest agent has no file-change notifications, so WatchDir polls:
// it lists the directory (and, when recursive, its subdirectories) every
// pollInterval and reports what changed between two listings. Events can
// lag by an interval; a rename shows as a remove and a create; a file
// written twice within an interval is one write.
const (
	pollInterval = 500 * time.Millisecond
	maxWatched   = 10000 // entries; past it the watch fails (resource_exhausted)
)

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

// fileState is what a listing says of one path.
type fileState struct {
	info pandastack.FileInfo
}

// fsWatchDir: filesystem.Filesystem/WatchDir (server-streaming), by
// polling. The Connect-Timeout-Ms header bounds it.
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
	fi, err := c.guest.Stat(ctx, root)
	if err == nil && !fi.IsDir {
		err = pandastack.Errorf(pandastack.EInvalid, "%s is not a directory", root)
	}
	var prev map[string]fileState
	if err == nil {
		prev, err = s.listTree(ctx, c, root, req.Recursive)
	}
	if err != nil {
		newStream(w).end(toRPCError(err))
		return
	}
	st := newStream(w)
	if st.send(watchMsg{Start: &struct{}{}}) != nil {
		return
	}
	stop := make(chan struct{})
	defer close(stop)
	go st.keepalive(r, watchMsg{Keepalive: &struct{}{}}, stop)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if r.Context().Err() == nil { // the watch's own deadline
				st.end(nil)
			}
			return
		case <-t.C:
		}
		cur, err := s.listTree(ctx, c, root, req.Recursive)
		if err != nil {
			if ctx.Err() != nil {
				continue // the deadline or the client: handled above
			}
			st.end(toRPCError(err))
			return
		}
		for _, ev := range diff(prev, cur) {
			if !req.IncludeEntry {
				ev.Entry = nil
			}
			if st.send(watchMsg{Filesystem: ev}) != nil {
				return
			}
		}
		prev = cur
	}
}

// listTree lists root (recursively if asked), by path relative to root.
func (s *Server) listTree(ctx context.Context, c *sandboxCall, root string, recursive bool) (map[string]fileState, error) {
	out := map[string]fileState{}
	dirs := []string{root}
	for len(dirs) > 0 {
		dir := dirs[0]
		dirs = dirs[1:]
		fis, err := c.guest.ListDir(ctx, dir)
		if err != nil {
			if dir != root && pandastack.ErrorCode(err) == pandastack.ENotFound {
				continue // removed while we looked
			}
			return nil, err
		}
		for _, fi := range fis {
			rel := strings.TrimPrefix(path.Join(dir, fi.Name), root+"/")
			out[rel] = fileState{info: fi}
			if len(out) > maxWatched {
				return nil, pandastack.Errorf(pandastack.ETooLarge, "%s holds more than %d entries to watch", root, maxWatched)
			}
			if recursive && fi.IsDir && fi.Link == "" {
				dirs = append(dirs, path.Join(dir, fi.Name))
			}
		}
	}
	return out, nil
}

// diff lists the events between two listings: removes, then creates and
// writes, each in name order.
func diff(prev, cur map[string]fileState) []*fsEvent {
	var removes, others []*fsEvent
	for name, p := range prev {
		if _, ok := cur[name]; !ok {
			e := toEntry(p.info)
			removes = append(removes, &fsEvent{Name: name, Type: "EVENT_TYPE_REMOVE", Entry: &e})
		}
	}
	for name, c := range cur {
		e := toEntry(c.info)
		p, ok := prev[name]
		switch {
		case !ok:
			others = append(others, &fsEvent{Name: name, Type: "EVENT_TYPE_CREATE", Entry: &e})
		case !c.info.IsDir && (p.info.Size != c.info.Size || !p.info.ModTime.Equal(c.info.ModTime)):
			others = append(others, &fsEvent{Name: name, Type: "EVENT_TYPE_WRITE", Entry: &e})
		case p.info.Mode != c.info.Mode:
			others = append(others, &fsEvent{Name: name, Type: "EVENT_TYPE_CHMOD", Entry: &e})
		}
	}
	byName := func(evs []*fsEvent) { sort.Slice(evs, func(i, j int) bool { return evs[i].Name < evs[j].Name }) }
	byName(removes)
	byName(others)
	return append(removes, others...)
}
