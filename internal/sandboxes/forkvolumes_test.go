package sandboxes_test

import (
	"context"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A fork that keeps volume copies and fails on the host leaves no volume
// record and the parent's volume attached as it was; a wrong count of
// names is refused before anything is made.
func TestForkKeepingVolumesLeavesNothingWhenItFails(t *testing.T) {
	host := newFakeHost()
	e, st := startEngine(t, host)
	ctx := context.Background()
	v, err := e.CreateVolume(ctx, "team_1", "data", 64)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := e.Create(ctx, pandastack.CreateRequest{TeamID: "team_1", Template: "base", TTL: time.Hour,
		Volumes: []pandastack.VolumeMount{{Volume: "data", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.ForkKeepingVolumes(ctx, sb.ID, nil, nil, ""); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("no name for the one volume: %v, want invalid", err)
	}
	if _, _, err := e.ForkKeepingVolumes(ctx, sb.ID, []string{"copy"}, map[string]string{"k": "v"}, "database:db-1"); err == nil {
		t.Fatal("the host refused the fork, yet it answered")
	}
	vols, err := st.ListVolumes(ctx, "team_1")
	if err != nil || len(vols) != 1 || vols[0].ID != v.ID || vols[0].SandboxID != sb.ID {
		t.Fatalf("volumes after the failed fork: %+v %v", vols, err)
	}
	if _, _, err := e.ForkKeepingVolumes(ctx, "sbx_none", []string{"copy"}, nil, ""); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("an unknown sandbox: %v", err)
	}
}
