package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/pandastack/pandastack"
)

// FileModeHeader carries a downloaded file's permission bits in octal
// ("0644").
const FileModeHeader = "X-Pandastack-File-Mode"

type entryList struct {
	Entries []pandastack.FileInfo `json:"entries"`
}

type pathRequest struct {
	Path string `json:"path"`
}

type renameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func queryPath(r *http.Request) (string, error) {
	return absPath("path", r.URL.Query().Get("path"))
}

// readFile streams a file's bytes. Errors before the first byte (no such
// file, a directory, ...) are JSON errors; an error after the headers went
// out aborts the connection, so the client sees a short body rather than a
// silently truncated file.
func (s *Server) readFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	started := false
	err = g.ReadFile(r.Context(), p, w, func(fi pandastack.FileInfo) error {
		if fi.IsDir {
			return invalid("%s is a directory", p)
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(fi.Size, 10))
		h.Set(FileModeHeader, fmt.Sprintf("%04o", fi.Mode&0o7777))
		noWriteDeadline(w)
		w.WriteHeader(http.StatusOK)
		started = true
		return nil
	})
	if err != nil {
		if !started {
			return wrap(err, "read "+p)
		}
		s.log.WarnContext(r.Context(), "file download failed mid-stream", "request_id", requestID(r), "path", p, "err", err.Error())
		panic(http.ErrAbortHandler)
	}
	return nil
}

// writeFile streams the request body into a file, creating or replacing it.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	mode := uint32(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o7777 {
			return invalid("mode must be octal permission bits such as 0644, got %q", m)
		}
		mode = uint32(v)
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	noWriteDeadline(w)
	noReadDeadline(w)
	fi, err := g.WriteFile(r.Context(), p, mode, r.Body)
	if err != nil {
		return wrap(err, "write "+p)
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	entries, err := g.ListDir(r.Context(), p)
	if err != nil {
		return wrap(err, "list "+p)
	}
	if entries == nil {
		entries = []pandastack.FileInfo{}
	}
	writeJSON(w, http.StatusOK, entryList{Entries: entries})
	return nil
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	fi, err := g.Stat(r.Context(), p)
	if err != nil {
		return wrap(err, "stat "+p)
	}
	writeJSON(w, http.StatusOK, fi)
	return nil
}

func (s *Server) makeDir(w http.ResponseWriter, r *http.Request) error {
	var req pathRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	p, err := absPath("path", req.Path)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	if err := g.MakeDir(r.Context(), p); err != nil {
		return wrap(err, "make directory "+p)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	recursive := false
	switch v := r.URL.Query().Get("recursive"); v {
	case "", "false", "0":
	case "true", "1":
		recursive = true
	default:
		return invalid("recursive must be true or false, got %q", v)
	}
	if p == "/" {
		return invalid("refusing to remove /")
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	if err := g.Remove(r.Context(), p, recursive); err != nil {
		return wrap(err, "remove "+p)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rename(w http.ResponseWriter, r *http.Request) error {
	var req renameRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	from, err := absPath("from", req.From)
	if err != nil {
		return err
	}
	to, err := absPath("to", req.To)
	if err != nil {
		return err
	}
	g, err := s.guest(r)
	if err != nil {
		return err
	}
	if err := g.Rename(r.Context(), from, to); err != nil {
		return wrap(err, fmt.Sprintf("rename %s to %s", from, to))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
