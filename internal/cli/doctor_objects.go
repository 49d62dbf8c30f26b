package cli

import (
	"context"

	"github.com/pandastack/pandastack/internal/objstore/objurl"
	"github.com/pandastack/pandastack/internal/server"
)

// checkObjectStore checks, as the server does at start, that the object
// store answers and takes its credentials.
func checkObjectStore(ctx context.Context, check func(name string, ok bool, detail string), dataDir, url string) {
	url = server.ObjectStoreURL(dataDir, url)
	if _, err := server.OpenObjectStore(ctx, url); err != nil {
		check("object store", false, err.Error())
		return
	}
	detail := objurl.Redact(url) + ": answers, credentials work"
	if objurl.Remote(url) {
		detail += " (every new snapshot is exported there)"
	}
	check("object store", true, detail)
}
