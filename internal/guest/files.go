package guest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/guestproto"
)

// fileInfo is the JSON shape of a path's metadata (pandastack.FileInfo).
type fileInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	IsDir   bool      `json:"is_dir"`
	ModTime time.Time `json:"mod_time"`
	Link    string    `json:"symlink_target,omitempty"`
}

func infoOf(path string, st fs.FileInfo) fileInfo {
	fi := fileInfo{Name: st.Name(), Path: path, Size: st.Size(), Mode: uint32(st.Mode().Perm()), IsDir: st.IsDir(), ModTime: st.ModTime().UTC()}
	if st.Mode()&fs.ModeSymlink != 0 {
		fi.Link, _ = os.Readlink(path)
	}
	return fi
}

func checkPath(p string) error {
	if p == "" || !filepath.IsAbs(p) {
		return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("path %q must be absolute", p)}
	}
	return nil
}

// readFile streams a file: OK with its metadata, Data packets, EOF.
func readFile(c *guestproto.Conn, req guestproto.Request) error {
	if err := checkPath(req.Path); err != nil {
		return err
	}
	f, err := os.Open(req.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return &guestproto.Error{Code: guestproto.ErrIsDir, Message: fmt.Sprintf("%s is a directory", req.Path)}
	}
	if err := c.WriteJSON(guestproto.PktOK, infoOf(req.Path, st)); err != nil {
		return nil
	}
	buf := make([]byte, 256<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			if werr := c.Write(guestproto.PktData, buf[:n]); werr != nil {
				return nil
			}
		}
		if err == io.EOF {
			return c.Write(guestproto.PktEOF, nil)
		}
		if err != nil {
			return err
		}
	}
}

// writeFile receives Data packets until EOF into a temporary file beside the
// target, then renames it into place: a write that breaks off leaves nothing.
// Missing parent directories are created.
func writeFile(c *guestproto.Conn, req guestproto.Request) error {
	if err := checkPath(req.Path); err != nil {
		return err
	}
	if st, err := os.Stat(req.Path); err == nil && st.IsDir() {
		return &guestproto.Error{Code: guestproto.ErrIsDir, Message: fmt.Sprintf("%s is a directory", req.Path)}
	}
	dir := filepath.Dir(req.Path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mode := fs.FileMode(req.Mode & 0o7777)
	if mode == 0 {
		mode = 0o644
	}
	tmp, err := os.CreateTemp(dir, uploadPrefix+"*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	for {
		typ, p, err := c.Read()
		if err != nil {
			return fmt.Errorf("upload of %s broke off: %w", req.Path, err)
		}
		if typ == guestproto.PktEOF {
			break
		}
		if typ != guestproto.PktData {
			return &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("unexpected packet %d in upload", typ)}
		}
		if _, err := tmp.Write(p); err != nil {
			return err
		}
	}
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), req.Path); err != nil {
		return err
	}
	ok = true
	st, err := os.Lstat(req.Path)
	if err != nil {
		return err
	}
	return c.WriteJSON(guestproto.PktOK, infoOf(req.Path, st))
}

// fileOp runs the metadata operations: list, stat, mkdir, remove, rename.
func fileOp(req guestproto.Request) (any, error) {
	if err := checkPath(req.Path); err != nil {
		return nil, err
	}
	switch req.Op {
	case guestproto.OpStat:
		st, err := os.Lstat(req.Path)
		if err != nil {
			return nil, err
		}
		return infoOf(req.Path, st), nil
	case guestproto.OpList:
		ents, err := os.ReadDir(req.Path)
		if err != nil {
			return nil, err
		}
		out := make([]fileInfo, 0, len(ents))
		for _, e := range ents {
			st, err := e.Info()
			if err != nil {
				continue
			}
			out = append(out, infoOf(filepath.Join(req.Path, e.Name()), st))
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out, nil
	case guestproto.OpMkdir:
		if st, err := os.Stat(req.Path); err == nil && !st.IsDir() {
			return nil, &guestproto.Error{Code: guestproto.ErrExists, Message: fmt.Sprintf("%s exists and is not a directory", req.Path)}
		}
		return struct{}{}, os.MkdirAll(req.Path, 0o755)
	case guestproto.OpRemove:
		if req.Path == "/" {
			return nil, &guestproto.Error{Code: guestproto.ErrInvalid, Message: "refusing to remove /"}
		}
		if _, err := os.Lstat(req.Path); err != nil {
			return nil, err
		}
		if req.Recursive {
			return struct{}{}, os.RemoveAll(req.Path)
		}
		return struct{}{}, os.Remove(req.Path)
	case guestproto.OpRename:
		if err := checkPath(req.To); err != nil {
			return nil, err
		}
		return struct{}{}, os.Rename(req.Path, req.To)
	}
	return nil, &guestproto.Error{Code: guestproto.ErrInvalid, Message: "unknown file operation " + req.Op}
}

func syncDisks() { unix.Sync() }

// toProtoError turns an OS error into a coded protocol error.
func toProtoError(err error) *guestproto.Error {
	return &guestproto.Error{Code: errCode(err), Message: err.Error()}
}

func errCode(err error) string {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return guestproto.ErrNotFound
	case errors.Is(err, fs.ErrExist):
		return guestproto.ErrExists
	case errors.Is(err, fs.ErrPermission):
		return guestproto.ErrPermission
	case errors.As(err, &errno) && errno == syscall.EISDIR:
		return guestproto.ErrIsDir
	case errors.As(err, &errno) && errno == syscall.ENOTDIR:
		return guestproto.ErrNotDir
	case errors.As(err, &errno) && errno == syscall.ENOTEMPTY:
		return guestproto.ErrNotEmpty
	}
	return guestproto.ErrInternal
}
