package sandboxes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A platform service's volume (a database's data) attaches only to that
// service's machines: a team sandbox naming it is refused, and nothing is
// left attached; the service's own machine takes it.
func TestManagedVolumeAttachesOnlyToItsService(t *testing.T) {
	host := newFakeHost()
	e, st := startEngine(t, host)
	ctx := context.Background()
	v, err := e.CreateManagedVolume(ctx, "team_1", "db-orders", 64, "database:db-orders")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetVolume(ctx, v.ID); err != nil || got.ManagedBy != "database:db-orders" {
		t.Fatalf("recorded: %+v %v", got, err)
	}
	mount := []pandastack.VolumeMount{{Volume: "db-orders", Path: "/pgdata"}}
	for _, by := range []string{"", "database:db-other"} {
		_, err := e.Create(ctx, pandastack.CreateRequest{TeamID: "team_1", Template: "base", TTL: time.Hour, Volumes: mount, ManagedBy: by})
		if pandastack.ErrorCode(err) != pandastack.EConflict || !strings.Contains(pandastack.ErrorMessage(err), "database db-orders") {
			t.Fatalf("a machine managed by %q took the database's volume: %v", by, err)
		}
	}
	if got, _ := st.GetVolume(ctx, v.ID); got.SandboxID != "" {
		t.Fatalf("a refused create left the volume attached to %s", got.SandboxID)
	}
	sb, err := e.Create(ctx, pandastack.CreateRequest{TeamID: "team_1", Template: "base", Lifetime: pandastack.LifetimeService,
		Volumes: mount, ManagedBy: "database:db-orders"})
	if err != nil {
		t.Fatalf("the database's own machine: %v", err)
	}
	if got, _ := st.GetVolume(ctx, v.ID); got.SandboxID != sb.ID {
		t.Fatalf("the volume is attached to %q, want %s", got.SandboxID, sb.ID)
	}
}
