package pandastack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"strconv"
	"time"
)

// FileInfo describes a path inside a sandbox.
type FileInfo struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Size          int64     `json:"size"`
	Mode          uint32    `json:"mode"` // permission bits, e.g. 0o644
	IsDir         bool      `json:"is_dir"`
	ModTime       time.Time `json:"mod_time"`
	SymlinkTarget string    `json:"symlink_target,omitempty"`
}

// Perm returns the permission bits as an fs.FileMode.
func (f FileInfo) Perm() fs.FileMode { return fs.FileMode(f.Mode).Perm() }

// Filesystem is a sandbox's file system. Paths are absolute.
type Filesystem struct{ s *Sandbox }

// Files returns the sandbox's file system.
func (s *Sandbox) Files() *Filesystem { return &Filesystem{s} }

func (f *Filesystem) pathQuery(path string) url.Values { return url.Values{"path": {path}} }

// Read returns a file's contents. For large files prefer ReadTo.
func (f *Filesystem) Read(ctx context.Context, path string) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := f.ReadTo(ctx, path, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadTo streams a file into w and returns the number of bytes copied. A
// transfer cut short is an error (io.ErrUnexpectedEOF).
func (f *Filesystem) ReadTo(ctx context.Context, path string, w io.Writer) (int64, error) {
	resp, err := f.s.c.send(ctx, request{method: "GET", path: f.s.path("/files"), query: f.pathQuery(path), accept: "application/octet-stream"})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("pandastack: read %s: %w", path, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("pandastack: read %s: got %d of %d bytes: %w", path, n, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	return n, nil
}

// Write creates or replaces a file with data (mode 0644).
func (f *Filesystem) Write(ctx context.Context, path string, data []byte) (*FileInfo, error) {
	return f.WriteFrom(ctx, path, bytes.NewReader(data), 0)
}

// WriteFrom creates or replaces a file with everything read from r,
// streaming it (chunked) without holding it in memory. Only mode's
// permission bits are used; 0 means 0644.
func (f *Filesystem) WriteFrom(ctx context.Context, path string, r io.Reader, mode fs.FileMode) (*FileInfo, error) {
	q := f.pathQuery(path)
	if mode.Perm() != 0 {
		q.Set("mode", fmt.Sprintf("%04o", uint32(mode.Perm())))
	}
	if r == nil {
		r = bytes.NewReader(nil)
	}
	var fi FileInfo
	if err := f.s.c.do(ctx, request{method: "PUT", path: f.s.path("/files"), query: q, body: r}, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// List returns a directory's entries, by name.
func (f *Filesystem) List(ctx context.Context, path string) ([]FileInfo, error) {
	var out struct {
		Entries []FileInfo `json:"entries"`
	}
	if err := f.s.c.do(ctx, request{method: "GET", path: f.s.path("/files/list"), query: f.pathQuery(path)}, &out); err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// Stat describes a path.
func (f *Filesystem) Stat(ctx context.Context, path string) (*FileInfo, error) {
	var fi FileInfo
	if err := f.s.c.do(ctx, request{method: "GET", path: f.s.path("/files/stat"), query: f.pathQuery(path)}, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// Exists reports whether a path exists.
func (f *Filesystem) Exists(ctx context.Context, path string) (bool, error) {
	_, err := f.Stat(ctx, path)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// MakeDir creates a directory and any missing parents.
func (f *Filesystem) MakeDir(ctx context.Context, path string) error {
	body := struct {
		Path string `json:"path"`
	}{path}
	return f.s.c.do(ctx, request{method: "POST", path: f.s.path("/files/mkdir"), body: body}, nil)
}

// Remove deletes a file or an empty directory; with recursive, a directory
// and everything in it.
func (f *Filesystem) Remove(ctx context.Context, path string, recursive bool) error {
	q := f.pathQuery(path)
	q.Set("recursive", strconv.FormatBool(recursive))
	return f.s.c.do(ctx, request{method: "DELETE", path: f.s.path("/files"), query: q}, nil)
}

// Rename moves a file or directory.
func (f *Filesystem) Rename(ctx context.Context, from, to string) error {
	body := struct {
		From string `json:"from"`
		To   string `json:"to"`
	}{from, to}
	return f.s.c.do(ctx, request{method: "POST", path: f.s.path("/files/rename"), body: body}, nil)
}
