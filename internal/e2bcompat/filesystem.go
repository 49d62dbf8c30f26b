package e2bcompat

import (
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/pandastack/pandastack"
)

// maxListDepth bounds ListDir's depth (each level is a guest call per
// directory).
const maxListDepth = 16

// entryInfo is filesystem.EntryInfo in proto3 JSON.
type entryInfo struct {
	Name          string  `json:"name"`
	Type          string  `json:"type"`
	Path          string  `json:"path"`
	Size          string  `json:"size"`
	Mode          uint32  `json:"mode"`
	Permissions   string  `json:"permissions"`
	Owner         string  `json:"owner"`
	Group         string  `json:"group"`
	ModifiedTime  string  `json:"modifiedTime,omitempty"`
	SymlinkTarget *string `json:"symlinkTarget,omitempty"`
}

func toEntry(fi pandastack.FileInfo) entryInfo {
	perm := fs.FileMode(fi.Mode).Perm()
	e := entryInfo{Name: fi.Name, Type: "FILE_TYPE_FILE", Path: fi.Path, Size: strconv.FormatInt(fi.Size, 10),
		Mode: uint32(perm), Permissions: perm.String()}
	switch {
	case fi.Link != "":
		e.Type = "FILE_TYPE_SYMLINK"
		link := fi.Link
		e.SymlinkTarget = &link
	case fi.IsDir:
		e.Type = "FILE_TYPE_DIRECTORY"
		e.Permissions = (perm | fs.ModeDir).String()
	}
	if !fi.ModTime.IsZero() {
		e.ModifiedTime = fi.ModTime.UTC().Format(time.RFC3339Nano)
	}
	return e
}

type pathRequest struct {
	Path  string `json:"path"`
	Depth uint32 `json:"depth"`
}

type entryResponse struct {
	Entry entryInfo `json:"entry"`
}

// unary reads a unary request into v, writing the error when it fails.
func unary(w http.ResponseWriter, r *http.Request, v any) bool {
	if e := readUnary(r, v); e != nil {
		writeConnectError(w, e)
		return false
	}
	return true
}

// fsStat: filesystem.Filesystem/Stat → {entry}; a missing path is not_found.
func (s *Server) fsStat(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req pathRequest
	if !unary(w, r, &req) {
		return
	}
	fi, err := c.guest.Stat(r.Context(), resolvePath(req.Path, rpcUser(r)))
	if err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, entryResponse{toEntry(fi)})
}

// fsListDir: filesystem.Filesystem/ListDir → {entries} to depth (default 1).
func (s *Server) fsListDir(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req pathRequest
	if !unary(w, r, &req) {
		return
	}
	depth := int(req.Depth)
	if depth == 0 {
		depth = 1
	}
	if depth > maxListDepth {
		depth = maxListDepth
	}
	out := struct {
		Entries []entryInfo `json:"entries"`
	}{Entries: []entryInfo{}}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		fis, err := c.guest.ListDir(r.Context(), dir)
		if err != nil {
			return err
		}
		for _, fi := range fis {
			out.Entries = append(out.Entries, toEntry(fi))
			if fi.IsDir && fi.Link == "" && level < depth {
				if err := walk(fi.Path, level+1); err != nil && level == 0 {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(resolvePath(req.Path, rpcUser(r)), 1); err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// fsMakeDir: filesystem.Filesystem/MakeDir makes a directory and its
// parents; one that exists is already_exists (the SDK returns false).
func (s *Server) fsMakeDir(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req pathRequest
	if !unary(w, r, &req) {
		return
	}
	user := rpcUser(r)
	p := resolvePath(req.Path, user)
	if _, err := c.guest.Stat(r.Context(), p); err == nil {
		writeConnectError(w, connectErr("already_exists", "%s already exists", p))
		return
	} else if pandastack.ErrorCode(err) != pandastack.ENotFound {
		writeConnectError(w, toRPCError(err))
		return
	}
	if user == "root" {
		if err := c.guest.MakeDir(r.Context(), p); err != nil {
			writeConnectError(w, toRPCError(err))
			return
		}
		s.statAnswer(w, r, c, p)
		return
	}
	fi, err := asUser(r.Context(), c.guest, user, p, `mkdir -p -- "$1"`, nil)
	if err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, entryResponse{toEntry(fi)})
}

type moveRequest struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// fsMove: filesystem.Filesystem/Move → {entry} of the destination.
func (s *Server) fsMove(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req moveRequest
	if !unary(w, r, &req) {
		return
	}
	user := rpcUser(r)
	from, to := resolvePath(req.Source, user), resolvePath(req.Destination, user)
	if err := c.guest.Rename(r.Context(), from, to); err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	s.statAnswer(w, r, c, to)
}

// fsRemove: filesystem.Filesystem/Remove removes a file or a whole tree.
func (s *Server) fsRemove(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	var req pathRequest
	if !unary(w, r, &req) {
		return
	}
	if err := c.guest.Remove(r.Context(), resolvePath(req.Path, rpcUser(r)), true); err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) statAnswer(w http.ResponseWriter, r *http.Request, c *sandboxCall, p string) {
	fi, err := c.guest.Stat(r.Context(), p)
	if err != nil {
		writeConnectError(w, toRPCError(err))
		return
	}
	writeJSON(w, http.StatusOK, entryResponse{toEntry(fi)})
}
