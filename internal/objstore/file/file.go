// Package file is the object store in a local directory: PandaStack's
// embedded default (DATA/objects). Each object is a file; a Put writes a
// temporary file, fsyncs it, renames it into place and fsyncs the
// directory, so an object is there whole or not at all, also after a
// crash. Every access goes through an os.Root, so no key — whatever it
// holds — reaches outside the directory.
//
// Layout: DIR/data/KEY is the object KEY; DIR/tmp holds Puts under way
// (cleared at Open). One difference from S3: a key cannot be both an
// object and the directory of others ("a" and "a/b"); such a Put fails.
package file

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pandastack/pandastack/internal/objstore"
)

// Store is an object store in a directory. Create it with Open.
type Store struct {
	dir  string
	root *os.Root
}

var _ objstore.Store = (*Store)(nil)

const (
	dataDir = "data"
	tmpDir  = "tmp"
)

// Open opens (creating it if needed) the object store in dir and removes
// the leftovers of Puts an earlier process did not finish.
func Open(dir string) (*Store, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", dir, err)
	}
	for _, d := range []string{dir, filepath.Join(dir, dataDir), filepath.Join(dir, tmpDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create object store: %w", err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	if err := root.RemoveAll(tmpDir); err != nil {
		root.Close()
		return nil, fmt.Errorf("clear object store's temporary files: %w", err)
	}
	if err := root.Mkdir(tmpDir, 0o700); err != nil {
		root.Close()
		return nil, fmt.Errorf("create object store: %w", err)
	}
	return &Store{dir: dir, root: root}, nil
}

// Close releases the directory.
func (s *Store) Close() error { return s.root.Close() }

// String is the store's URL.
func (s *Store) String() string { return "file://" + s.dir }

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func objPath(key string) string { return dataDir + "/" + key }

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	if err := objstore.CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	tmp := tmpDir + "/put-" + hex.EncodeToString(b)
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			s.root.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: sync: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	dst := objPath(key)
	parent := path.Dir(dst)
	// A concurrent Delete may remove an emptied parent between MkdirAll
	// and Rename: try once more.
	for try := 0; ; try++ {
		if err := s.root.MkdirAll(parent, 0o700); err != nil {
			s.root.Remove(tmp)
			done = true
			return s.conflict(key, err)
		}
		err = s.root.Rename(tmp, dst)
		if err == nil {
			break
		}
		if try == 0 && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		s.root.Remove(tmp)
		done = true
		return s.conflict(key, err)
	}
	done = true
	if d, err := s.root.Open(parent); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return fmt.Errorf("put %s: sync directory: %w", key, err)
		}
	}
	return nil
}

// conflict explains a Put that met a file where a directory must be, or
// the reverse.
func (s *Store) conflict(key string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
		return fmt.Errorf("put %s: a key cannot be both an object and a prefix of other keys in a file object store: %w", key, err)
	}
	return fmt.Errorf("put %s: %w", key, err)
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := objstore.CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	f, err := s.root.Open(objPath(key))
	if err != nil {
		return nil, notFound("get", key, err)
	}
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("get %s: %w", key, objstore.ErrNotFound)
	}
	return &ctxFile{ctx: ctx, File: f}, nil
}

// Stat implements objstore.Store.
func (s *Store) Stat(ctx context.Context, key string) (objstore.Info, error) {
	if err := objstore.CheckKey(key); err != nil {
		return objstore.Info{}, err
	}
	fi, err := s.root.Stat(objPath(key))
	if err != nil {
		return objstore.Info{}, notFound("stat", key, err)
	}
	if fi.IsDir() {
		return objstore.Info{}, fmt.Errorf("stat %s: %w", key, objstore.ErrNotFound)
	}
	return objstore.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// List implements objstore.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.Info, error) {
	// Walk the deepest directory the prefix names whole.
	start := dataDir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		if err := objstore.CheckKey(prefix[:i]); err != nil {
			return nil, nil // no key has that prefix
		}
		start = objPath(prefix[:i])
	}
	var out []objstore.Info
	err := fs.WalkDir(s.root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		key := strings.TrimPrefix(p, dataDir+"/")
		if d.IsDir() {
			// Skip directories the prefix rules out.
			if p != start && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // deleted while listing
				return nil
			}
			return err
		}
		out = append(out, objstore.Info{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements objstore.Store. Directories it leaves empty go too.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	p := objPath(key)
	if fi, err := s.root.Lstat(p); err == nil && fi.IsDir() {
		return nil // a prefix, not an object
	}
	if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	for d := path.Dir(p); d != dataDir && d != "."; d = path.Dir(d) {
		if s.root.Remove(d) != nil { // not empty (or gone): stop
			break
		}
	}
	return nil
}

// PresignGet implements objstore.Store: a directory has no URLs.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	return "", fmt.Errorf("presign %s: %w", key, objstore.ErrNotSupported)
}

// Check implements objstore.Store: the directory is there and writable.
func (s *Store) Check(ctx context.Context) error {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	name := tmpDir + "/check-" + hex.EncodeToString(b)
	if err := s.root.WriteFile(name, nil, 0o600); err != nil {
		return fmt.Errorf("object store %s is not writable: %w", s, err)
	}
	return s.root.Remove(name)
}

func notFound(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%s %s: %w", op, key, objstore.ErrNotFound)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// ctxReader ends a copy when its context does.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// ctxFile is an object being read; its reads fail once ctx is done.
type ctxFile struct {
	ctx context.Context
	*os.File
}

func (c *ctxFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.File.Read(p)
}

// WriteTo hides os.File's, so io.Copy goes through Read (and ctx).
func (c *ctxFile) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, struct{ io.Reader }{c})
}
