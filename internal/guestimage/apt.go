package guestimage

import (
	"context"
	"fmt"
	"io"
)

// hostAptEnv is the environment for apt commands run on the host.
var hostAptEnv = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"DEBIAN_FRONTEND=noninteractive",
	"LC_ALL=C",
	"HOME=/root",
}

// withAptLists runs fn; if it fails, it runs `apt-get update` once on the
// host (the package lists may be missing, as in a fresh container) and runs
// fn again. An apt-get update that fails only partly (an unreachable
// third-party repository) still counts if the retry then succeeds.
func withAptLists(ctx context.Context, progress io.Writer, fn func() error) error {
	err := fn()
	if err == nil || ctx.Err() != nil {
		return err
	}
	progressf(progress, "apt: %v; running apt-get update and retrying", err)
	upd := command{name: "apt-get", args: []string{"update"}, env: hostAptEnv, prefix: "apt-get update: "}
	updErr := upd.run(ctx, progress)
	if err := fn(); err != nil {
		if updErr != nil {
			return fmt.Errorf("%w (apt-get update also failed: %v)", err, updErr)
		}
		return err
	}
	return nil
}
