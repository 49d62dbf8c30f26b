package functions

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/pandastack/pandastack"
)

// Bundle limits.
const (
	DefaultMaxBundleBytes = 20 << 20  // the upload (compressed)
	MaxUnpackedBytes      = 100 << 20 // the files in it, together
	MaxBundleFiles        = 10000
)

// bundle is an upload checked and repacked as a plain tar whose entries
// sit under codeDir (relative to /), ready to unpack in the guest.
type bundle struct {
	tar    []byte
	sha256 string
	size   int64
	files  map[string]bool // paths inside the bundle
}

// readBundle checks a tar.gz or zip upload (named by its first bytes) and
// repacks it with shims. Errors are EInvalid and say what is wrong.
func readBundle(data []byte, shims shimSet) (*bundle, error) {
	sum := sha256.Sum256(data)
	b := &bundle{sha256: hex.EncodeToString(sum[:]), size: int64(len(data)), files: map[string]bool{}}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var total int64
	add := func(name string, mode int64, r io.Reader) error {
		clean, err := bundlePath(name)
		if err != nil || clean == "" {
			return err
		}
		if len(b.files) >= MaxBundleFiles {
			return pandastack.Errorf(pandastack.EInvalid, "bundle has more than %d files", MaxBundleFiles)
		}
		body, err := io.ReadAll(io.LimitReader(r, MaxUnpackedBytes-total+1))
		if err != nil {
			return pandastack.Errorf(pandastack.EInvalid, "bundle: read %s: %v", name, err)
		}
		if total += int64(len(body)); total > MaxUnpackedBytes {
			return pandastack.Errorf(pandastack.ETooLarge, "bundle unpacks to more than %d MiB", MaxUnpackedBytes>>20)
		}
		b.files[clean] = true
		hdr := &tar.Header{Name: codeDir[1:] + "/" + clean, Mode: 0o644 | (mode & 0o111), Size: int64(len(body)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	}
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, pandastack.Errorf(pandastack.EInvalid, "bundle is not a valid tar.gz: %v", err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "bundle is not a valid tar.gz: %v", err)
			}
			switch h.Typeflag {
			case tar.TypeReg:
				if err := add(h.Name, h.Mode, tr); err != nil {
					return nil, err
				}
			case tar.TypeDir:
			default:
				return nil, pandastack.Errorf(pandastack.EInvalid, "bundle entry %s: only regular files and directories are allowed", h.Name)
			}
		}
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, pandastack.Errorf(pandastack.EInvalid, "bundle is not a valid zip: %v", err)
		}
		for _, f := range zr.File {
			if f.FileInfo().IsDir() {
				continue
			}
			if !f.Mode().IsRegular() {
				return nil, pandastack.Errorf(pandastack.EInvalid, "bundle entry %s: only regular files and directories are allowed", f.Name)
			}
			rc, err := f.Open()
			if err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "bundle entry %s: %v", f.Name, err)
			}
			err = add(f.Name, int64(f.Mode().Perm()), rc)
			rc.Close()
			if err != nil {
				return nil, err
			}
		}
	default:
		return nil, pandastack.Errorf(pandastack.EInvalid, "bundle must be a tar.gz or a zip archive")
	}
	if len(b.files) == 0 {
		return nil, pandastack.Errorf(pandastack.EInvalid, "bundle holds no files")
	}
	if err := shims.add(tw); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("repack bundle: %w", err)
	}
	b.tar = buf.Bytes()
	return b, nil
}

// bundlePath is name cleaned and relative ("" for the root); one that
// climbs out is EInvalid.
func bundlePath(name string) (string, error) {
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", pandastack.Errorf(pandastack.EInvalid, "bundle entry %s climbs out of the bundle", name)
		}
	}
	return strings.TrimPrefix(path.Clean("/"+name), "/"), nil
}

// maxInlineBundleBytes bounds the bundles whose files a deploy hands to
// the shim in its load request instead of unpacking them with tar.
const maxInlineBundleBytes = 4 << 20

// codeFile is one file of a bundle as the shim writes it: path relative to
// codeDir (clean), permission bits, content in base64.
type codeFile struct {
	Path string `json:"path"`
	Mode int64  `json:"mode"`
	Data string `json:"data"`
}

// codeFiles lists the bundle's own files (not the shims) when they hold
// at most limit bytes together; ok is false past it.
func (b *bundle) codeFiles(limit int) (files []codeFile, ok bool) {
	prefix := codeDir[1:] + "/"
	tr := tar.NewReader(bytes.NewReader(b.tar))
	total := 0
	for {
		h, err := tr.Next()
		if err != nil {
			return files, errors.Is(err, io.EOF)
		}
		rel, found := strings.CutPrefix(h.Name, prefix)
		if !found {
			continue
		}
		if total += int(h.Size); total > limit {
			return nil, false
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return nil, false
		}
		files = append(files, codeFile{Path: rel, Mode: h.Mode & 0o777, Data: base64.StdEncoding.EncodeToString(body)})
	}
}
