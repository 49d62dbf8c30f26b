package e2e

import (
	"context"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// wantOverNIC fails unless requests to app reach its live release
// (deploy) over the release machine's NIC: the guest sends every answer
// out of its tap (tapBytes), which the guest agent's channel never
// crosses.
func wantOverNIC(t *testing.T, c *sdk.Client, app, deploy string) {
	t.Helper()
	var release string
	for _, sb := range mustList(t, c) {
		if sb.Metadata["deploy"] == deploy && sb.Metadata["role"] == "release" && sb.Live() {
			release = sb.ID
		}
	}
	if release == "" {
		t.Fatalf("no running release machine of deploy %s", deploy)
	}
	before, answered := tapBytes(t, release), 0
	for range 20 {
		code, body, err := appGet(context.Background(), app, "/")
		if err != nil || code != 200 {
			t.Fatalf("GET / of %s: %d %v", app, code, err)
		}
		answered += len(body)
	}
	if sent := tapBytes(t, release) - before; sent < int64(answered) {
		t.Fatalf("the release's NIC carried %d bytes of %d answered: the requests went through the guest agent", sent, answered)
	}
}
