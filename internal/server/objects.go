package server

import (
	"context"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack/internal/objstore"
	"github.com/pandastack/pandastack/internal/objstore/objurl"
)

// ObjectStoreURL is the object store cfg names: --object-store, or the
// data dir's own directory store by default.
func ObjectStoreURL(dataDir, url string) string {
	if url != "" {
		return url
	}
	return "file://" + filepath.Join(dataDir, "objects")
}

// checkTimeout bounds the start-up check of the object store.
const checkTimeout = 20 * time.Second

// OpenObjectStore opens the object store url names and checks it answers
// and takes its credentials; the error says which, never the secret.
func OpenObjectStore(ctx context.Context, url string) (objstore.Store, error) {
	objects, err := objurl.Open(url)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	if err := objects.Check(cctx); err != nil {
		return nil, err // it names the store (without its secret)
	}
	return objects, nil
}
