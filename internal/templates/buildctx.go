package templates

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/templates/spec"
)

// SpecEntry is the name of the tar entry that carries the spec file in an
// uploaded build context; every other entry is the context.
const SpecEntry = ".pandastack-spec"

// MaxContextBytes and MaxContextEntries bound an uploaded build context.
const (
	MaxContextBytes   = 2 << 30
	MaxContextEntries = 100000
	// MaxContextPath bounds an entry's name (PATH_MAX): each level of a
	// path is a directory, an inode the byte bound does not count.
	MaxContextPath = 4096
)

// ExtractContext unpacks an uploaded build context (a tar stream) into dir
// and returns the spec file it carries. Entries with absolute names or names
// leading outside dir are refused; symbolic links are kept as they are (a
// COPY that would follow one out of the context is refused later).
func ExtractContext(r io.Reader, dir string) ([]byte, error) {
	return extractContext(r, dir, MaxContextBytes, MaxContextEntries)
}

// extractContext is ExtractContext with its bounds as parameters (tests
// use small ones).
func extractContext(r io.Reader, dir string, maxBytes int64, maxEntries int) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	var specData []byte
	var total int64
	// Directories an entry's name creates are inodes too: at most
	// maxEntries of them (a name a/b/c/... makes one per level).
	dirs := map[uint64]struct{}{}
	seed := maphash.MakeSeed()
	addDirs := func(d string) error {
		for ; d != "." && d != "/"; d = path.Dir(d) {
			h := maphash.String(seed, d)
			if _, ok := dirs[h]; ok {
				return nil
			}
			if len(dirs) >= maxEntries {
				return pandastack.Errorf(pandastack.ETooLarge, "the build context has more than %d directories", maxEntries)
			}
			dirs[h] = struct{}{}
		}
		return nil
	}
	for n := 0; ; n++ {
		if n > maxEntries {
			return nil, pandastack.Errorf(pandastack.ETooLarge, "the build context has more than %d entries", maxEntries)
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, pandastack.Errorf(pandastack.EInvalid, "read build context (a tar stream): %v", err)
		}
		if h.Name == SpecEntry {
			if h.Size > spec.MaxSize {
				return nil, pandastack.Errorf(pandastack.ETooLarge, "the spec file is larger than %d bytes", spec.MaxSize)
			}
			if specData, err = io.ReadAll(tr); err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "read spec: %v", err)
			}
			continue
		}
		if len(h.Name) > MaxContextPath {
			return nil, pandastack.Errorf(pandastack.EInvalid, "build context entry %.64q...: a name longer than %d bytes", h.Name, MaxContextPath)
		}
		name, err := spec.ContextPath(strings.TrimSuffix(h.Name, "/"))
		if err != nil || name == "." {
			if name == "." {
				continue
			}
			return nil, pandastack.Errorf(pandastack.EInvalid, "build context entry %q: %v", h.Name, err)
		}
		d := path.Dir(name)
		if h.Typeflag == tar.TypeDir {
			d = name
		}
		if err := addDirs(d); err != nil {
			return nil, err
		}
		if d := path.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "build context entry %q: %v", h.Name, err)
			}
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "build context entry %q: %v", h.Name, err)
			}
		case tar.TypeReg:
			total += h.Size
			if total > maxBytes {
				return nil, pandastack.Errorf(pandastack.ETooLarge, "the build context is larger than %d bytes", maxBytes)
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode)&0o777|0o600)
			if err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "build context entry %q: %v", h.Name, err)
			}
			src := &readErr{r: tr}
			_, err = io.Copy(f, src)
			f.Close()
			if src.err != nil {
				// The upload, not this host: cut short or over the limit.
				return nil, pandastack.Errorf(pandastack.EInvalid, "read build context entry %q: %v", h.Name, src.err)
			}
			if err != nil {
				return nil, fmt.Errorf("extract %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			if err := root.Symlink(h.Linkname, name); err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "build context entry %q: %v", h.Name, err)
			}
		default:
			// Devices, fifos, hard links: not part of a build context.
		}
	}
	if specData == nil {
		return nil, pandastack.Errorf(pandastack.EInvalid, "the build context carries no spec file (tar entry %s)", SpecEntry)
	}
	return specData, nil
}

// readErr remembers the error of the reader it wraps, telling the
// upload's failures from the host's.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}

// contextFile is one regular file a COPY sends.
type contextFile struct {
	rel  string // path relative to the COPY source ("" when the source is a file)
	mode fs.FileMode
}

// copyFiles lists what COPY src sends, refusing anything that leads out of
// the context (os.Root follows symbolic links only inside it).
func copyFiles(root *os.Root, src string) (isDir bool, files []contextFile, err error) {
	st, err := root.Stat(src)
	if err != nil {
		return false, nil, copyErr(src, err)
	}
	if !st.IsDir() {
		return false, []contextFile{{"", st.Mode()}}, nil
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		f, err := root.Open(path.Join(src, rel))
		if err != nil {
			return copyErr(path.Join(src, rel), err)
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return copyErr(path.Join(src, rel), err)
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			r := path.Join(rel, e.Name())
			st, err := root.Stat(path.Join(src, r)) // follows links, inside the root only
			if err != nil {
				return copyErr(path.Join(src, r), err)
			}
			if st.IsDir() {
				if err := walk(r); err != nil {
					return err
				}
			} else if st.Mode().IsRegular() {
				files = append(files, contextFile{r, st.Mode()})
			}
		}
		return nil
	}
	return true, files, walk("")
}

func copyErr(p string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return pandastack.Errorf(pandastack.EInvalid, "COPY %s: no such file in the build context", p)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return pandastack.Errorf(pandastack.EInvalid, "COPY %s: a symbolic link leads outside the build context", p)
	}
	return pandastack.Errorf(pandastack.EInvalid, "COPY %s: %v", p, err)
}

// copyHash is the content key of COPY src: every file's path, mode and bytes.
func copyHash(root *os.Root, src string) (string, error) {
	isDir, files, err := copyFiles(root, src)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%v\x00", isDir)
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%o\x00", f.rel, f.mode.Perm())
		r, err := root.Open(path.Join(src, f.rel))
		if err != nil {
			return "", copyErr(path.Join(src, f.rel), err)
		}
		n, err := io.Copy(h, r)
		r.Close()
		if err != nil {
			return "", fmt.Errorf("hash %s: %w", f.rel, err)
		}
		fmt.Fprintf(h, "\x00%d\x00", n)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyIn sends COPY src dst into the guest. dst is relative to workdir
// unless absolute; a directory source copies its content into dst; a file
// source goes to dst, or into dst when dst ends in '/'.
func copyIn(ctx context.Context, cl *guestconn.Client, root *os.Root, src, dst, workdir string, log io.Writer) error {
	if !path.IsAbs(dst) {
		if workdir == "" {
			workdir = "/"
		}
		dst = path.Join(workdir, dst) + map[bool]string{true: "/"}[strings.HasSuffix(dst, "/")]
	}
	isDir, files, err := copyFiles(root, src)
	if err != nil {
		return err
	}
	if isDir {
		if err := cl.MakeDir(ctx, path.Clean(dst)); err != nil {
			return fmt.Errorf("mkdir %s: %w", dst, err)
		}
	}
	for _, f := range files {
		target := path.Clean(dst)
		switch {
		case isDir:
			target = path.Join(dst, f.rel)
		case strings.HasSuffix(dst, "/"):
			target = path.Join(dst, filepath.Base(src))
		}
		r, err := root.Open(path.Join(src, f.rel))
		if err != nil {
			return copyErr(path.Join(src, f.rel), err)
		}
		_, err = cl.WriteFile(ctx, target, uint32(f.mode.Perm()), r)
		r.Close()
		if err != nil {
			return fmt.Errorf("write %s in the guest: %w", target, err)
		}
		fmt.Fprintf(log, "  %s -> %s\n", path.Join(src, f.rel), target)
	}
	return nil
}

// BuildFromTar unpacks an uploaded build context (a tar stream carrying the
// spec as SpecEntry) into a directory of its own and builds from it; the
// directory is removed afterwards.
func (b *Builder) BuildFromTar(ctx context.Context, req pandastack.CustomBuild, r io.Reader, log io.Writer) (pandastack.Template, error) {
	base := filepath.Join(b.cfg.DataDir, "contexts")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return pandastack.Template{}, err
	}
	dir, err := os.MkdirTemp(base, "ctx-")
	if err != nil {
		return pandastack.Template{}, err
	}
	defer os.RemoveAll(dir)
	if req.Spec, err = ExtractContext(r, dir); err != nil {
		return pandastack.Template{}, err
	}
	req.Context = dir
	return b.BuildCustom(ctx, req, log)
}
