// Package objstore is PandaStack's object storage: the one interface that
// snapshots (and, next, backups, app releases and cross-host transfers) are
// written through, and the errors every backend returns.
//
// Backends live in packages of their own: objstore/file (a local directory,
// the embedded default) and objstore/s3 (any S3-compatible service).
// objstore/objurl opens one from a URL; objstore/objstoretest is the one
// conformance suite every backend runs.
//
// Objects are immutable blobs addressed by a key: slash-separated segments
// of UTF-8, see CheckKey. A Put replaces a whole object atomically: readers
// see the old bytes or the new ones, never a mix or a prefix.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pandastack/pandastack"
)

// Store is an object store. Every method takes a context first; a
// cancelled context ends the call (and a Get's reads) with its error.
type Store interface {
	// Put stores r's bytes under key, replacing any object there. r is
	// streamed: the object is never held whole in memory. If Put fails or
	// ctx ends, nothing is stored (the old object, if any, stays).
	Put(ctx context.Context, key string, r io.Reader) error
	// Get opens the object for reading; the caller closes it. A missing
	// object is ErrNotFound.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes one object; a missing one is ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List returns every object whose key starts with prefix ("" for all),
	// sorted by key. It pages through backends that page.
	List(ctx context.Context, prefix string) ([]Info, error)
	// Delete removes an object. A missing object is not an error.
	Delete(ctx context.Context, key string) error
	// PresignGet returns a URL a plain HTTP GET fetches the object from,
	// without credentials, until ttl has passed. Backends that cannot
	// answer ErrNotSupported.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
	// Check verifies the store answers and accepts its credentials, by
	// listing (and, for a bucket, reaching) it. Servers call it at start.
	Check(ctx context.Context) error
	// String names the store for logs and messages (never credentials).
	String() string
}

// Info describes an object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Errors every backend returns (wrapped: test with errors.Is).
var (
	// ErrNotFound: no object has that key. It is a *pandastack.Error with
	// code ENotFound, so it reaches an API caller as a 404.
	ErrNotFound error = &pandastack.Error{Code: pandastack.ENotFound, Message: "object not found"}
	// ErrNotSupported: the backend cannot do this (a presigned URL on a
	// local directory).
	ErrNotSupported = errors.New("not supported by this object store")
	// ErrInvalidKey: the key breaks CheckKey's rules.
	ErrInvalidKey error = &pandastack.Error{Code: pandastack.EInvalid, Message: "invalid object key"}
)

// MaxKeyLen is the longest key, in bytes (S3's limit).
const MaxKeyLen = 1024

// CheckKey reports whether key is one every backend stores the same way:
// non-empty, at most MaxKeyLen bytes of UTF-8, no control characters, no
// leading or trailing slash, no empty, "." or ".." segments. Anything else
// — spaces, unicode, "+", "%", "?", "#", "=" — is allowed.
func CheckKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidKey, key, why) }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxKeyLen))
	case !utf8.ValidString(key):
		return bad("not UTF-8")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return bad("has a control character")
		}
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "":
			return bad("has an empty segment (a leading, trailing or double slash)")
		case ".", "..":
			return bad(`has a "." or ".." segment`)
		}
	}
	return nil
}

// IsNotFound reports whether err says an object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
