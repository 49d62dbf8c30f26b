package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// watchMask is what a watch asks inotify for.
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_ONLYDIR

// maxWatchDirs bounds the directories one recursive watch follows.
const maxWatchDirs = 8192

// watcher turns inotify events of one watched tree into WatchEvents.
type watcher struct {
	f         *os.File // the inotify descriptor, non-blocking, in the poller
	fd        int
	root      string
	recursive bool
	dirs      map[int]string // watch descriptor → path relative to root ("" is root)

	// Moves out, by cookie, waiting for the move in that pairs them into a
	// rename; the two can come in separate reads.
	from      map[uint32]move
	fromOrder []uint32
}

type move struct {
	path   string
	isDir  bool
	upload bool // the temporary file of an upload (uploadPrefix)
}

// uploadPrefix names the temporary file an upload writes before it
// renames it into place (files.go). A watch does not show it: the upload
// shows as its file created and written, when it is in place.
const uploadPrefix = ".pandastack-upload-"

func isUpload(name string) bool { return strings.HasPrefix(name, uploadPrefix) }

// moveWait is how long a move out waits for its move in before it counts
// as a removal (the file left the tree).
const moveWait = 100 * time.Millisecond

// watch serves OpWatch: inotify (x/sys/unix) on the directory and, when
// recursive, every directory under it, added as they appear. Events flow
// with the stream's flow control; a host that reads too slowly makes the
// kernel's queue overflow, which is reported, not buffered here.
func watch(c *guestproto.Conn, req guestproto.Request) error {
	root := filepath.Clean(req.Path)
	if !filepath.IsAbs(root) {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("path %q is not absolute", req.Path)}
	}
	if fi, err := os.Stat(root); err != nil {
		return err
	} else if !fi.IsDir() {
		return &guestproto.Error{Code: guestproto.ErrNotDir, Message: fmt.Sprintf("%s is not a directory", root)}
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), root: root, recursive: req.Recursive, dirs: map[int]string{}, from: map[uint32]move{}}
	defer w.f.Close()
	if rc, err := w.f.SyscallConn(); err == nil {
		_ = rc.Control(func(x uintptr) { w.fd = int(x) })
	}
	if err := w.add(""); err != nil {
		return err
	}
	if w.recursive {
		w.addTree("", nil)
	}
	if err := c.WriteJSON(guestproto.PktOK, struct{}{}); err != nil {
		return nil
	}
	// The host ends the watch by closing the stream; that ends the reads.
	go func() {
		for {
			if _, _, err := c.Read(); err != nil {
				w.f.Close()
				return
			}
		}
	}()
	send := func(ev guestproto.WatchEvent) error {
		b, _ := json.Marshal(ev)
		return c.Write(guestproto.PktData, b)
	}
	buf := make([]byte, 64<<10)
	for {
		if len(w.from) > 0 {
			_ = w.f.SetReadDeadline(time.Now().Add(moveWait))
		} else {
			_ = w.f.SetReadDeadline(time.Time{})
		}
		n, err := w.f.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			for _, ev := range w.flushMoves() {
				if send(ev) != nil {
					return nil
				}
			}
			continue
		}
		if err != nil {
			return nil // closed: the host went away
		}
		evs, gone := w.parse(buf[:n])
		for _, ev := range evs {
			if send(ev) != nil {
				return nil
			}
		}
		if gone {
			return &guestproto.Error{Code: guestproto.ErrNotFound, Message: fmt.Sprintf("the watched directory %s was removed", root)}
		}
	}
}

// add watches one directory (relative to the root).
func (w *watcher) add(rel string) error {
	if len(w.dirs) >= maxWatchDirs {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("more than %d directories to watch under %s", maxWatchDirs, w.root)}
	}
	wd, err := unix.InotifyAddWatch(w.fd, filepath.Join(w.root, rel), watchMask)
	if err != nil {
		return err
	}
	w.dirs[wd] = rel
	return nil
}

// addTree watches the directories under rel; with emit, it also reports
// what is already in them as created (a directory made with its contents,
// as by mkdir -p or a move into the tree, shows whole).
func (w *watcher) addTree(rel string, emit func(guestproto.WatchEvent)) {
	ents, err := os.ReadDir(filepath.Join(w.root, rel))
	if err != nil {
		return
	}
	for _, e := range ents {
		if isUpload(e.Name()) {
			continue
		}
		p := filepath.Join(rel, e.Name())
		if emit != nil {
			emit(guestproto.WatchEvent{Type: "create", Path: p, IsDir: e.IsDir()})
		}
		if e.IsDir() {
			if w.add(p) == nil {
				w.addTree(p, emit)
			}
		}
	}
}

// parse turns a buffer of inotify events into WatchEvents. Moves are paired
// by cookie into renames; one out of the tree is a remove, one into it a
// create. gone reports the root's removal.
func (w *watcher) parse(b []byte) (out []guestproto.WatchEvent, gone bool) {
	emit := func(ev guestproto.WatchEvent) {
		// Writes come in bursts (one per write call): keep one of a run.
		if ev.Type == "write" && len(out) > 0 {
			last := out[len(out)-1]
			if last.Type == "write" && last.Path == ev.Path {
				return
			}
		}
		out = append(out, ev)
	}
	for len(b) >= unix.SizeofInotifyEvent {
		raw := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		nameLen := int(raw.Len)
		if unix.SizeofInotifyEvent+nameLen > len(b) {
			break
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+nameLen]), "\x00")
		b = b[unix.SizeofInotifyEvent+nameLen:]
		mask := raw.Mask
		if mask&unix.IN_Q_OVERFLOW != 0 {
			emit(guestproto.WatchEvent{Type: "overflow"})
			continue
		}
		dir, ok := w.dirs[int(raw.Wd)]
		if !ok {
			continue
		}
		if mask&unix.IN_IGNORED != 0 {
			delete(w.dirs, int(raw.Wd))
			continue
		}
		if mask&unix.IN_DELETE_SELF != 0 {
			if dir == "" {
				gone = true
			}
			continue
		}
		p := filepath.Join(dir, name)
		isDir := mask&unix.IN_ISDIR != 0
		if isUpload(name) && !isDir {
			// An upload's own file: only its move into place counts.
			if mask&unix.IN_MOVED_FROM != 0 {
				w.from[raw.Cookie] = move{path: p, upload: true}
				w.fromOrder = append(w.fromOrder, raw.Cookie)
			}
			continue
		}
		switch {
		case mask&unix.IN_CREATE != 0:
			emit(guestproto.WatchEvent{Type: "create", Path: p, IsDir: isDir})
			if isDir && w.recursive && w.add(p) == nil {
				w.addTree(p, emit)
			}
		case mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) != 0:
			emit(guestproto.WatchEvent{Type: "write", Path: p})
		case mask&unix.IN_DELETE != 0:
			emit(guestproto.WatchEvent{Type: "remove", Path: p, IsDir: isDir})
		case mask&unix.IN_ATTRIB != 0:
			emit(guestproto.WatchEvent{Type: "chmod", Path: p, IsDir: isDir})
		case mask&unix.IN_MOVED_FROM != 0:
			w.from[raw.Cookie] = move{path: p, isDir: isDir}
			w.fromOrder = append(w.fromOrder, raw.Cookie)
		case mask&unix.IN_MOVED_TO != 0:
			if m, ok := w.from[raw.Cookie]; ok && m.upload {
				delete(w.from, raw.Cookie)
				emit(guestproto.WatchEvent{Type: "create", Path: p})
				emit(guestproto.WatchEvent{Type: "write", Path: p})
			} else if ok {
				delete(w.from, raw.Cookie)
				emit(guestproto.WatchEvent{Type: "rename", Path: p, From: m.path, IsDir: isDir})
				if isDir {
					w.moved(m.path, p)
				}
			} else {
				emit(guestproto.WatchEvent{Type: "create", Path: p, IsDir: isDir})
				if isDir && w.recursive && w.add(p) == nil {
					w.addTree(p, emit)
				}
			}
		}
	}
	if gone {
		out = append(out, w.flushMoves()...)
	}
	return out, gone
}

// flushMoves reports the moves out that no move in paired within moveWait:
// they left the tree.
func (w *watcher) flushMoves() []guestproto.WatchEvent {
	var out []guestproto.WatchEvent
	for _, ck := range w.fromOrder {
		if m, ok := w.from[ck]; ok && !m.upload {
			out = append(out, guestproto.WatchEvent{Type: "remove", Path: m.path, IsDir: m.isDir})
			if m.isDir {
				w.forget(m.path)
			}
		}
	}
	w.from, w.fromOrder = map[uint32]move{}, nil
	return out
}

// forget stops watching the directories under rel (moved out of the tree).
func (w *watcher) forget(rel string) {
	for wd, p := range w.dirs {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			_, _ = unix.InotifyRmWatch(w.fd, uint32(wd))
			delete(w.dirs, wd)
		}
	}
}

// moved renames the watched directories under old to under new.
func (w *watcher) moved(old, new string) {
	for wd, rel := range w.dirs {
		if rel == old || strings.HasPrefix(rel, old+"/") {
			w.dirs[wd] = new + strings.TrimPrefix(rel, old)
		}
	}
}
