package sandboxes_test

import (
	"context"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// A machine restored from a base is a service machine of the team whose
// copy of the base's volume is a new volume of the team, managed by the
// service and attached where the base had it; the host is asked for the
// base's snapshot with that volume.
func TestRestoreBaseKeepsTheVolumeForTheTeam(t *testing.T) {
	host := newFakeHost()
	var asked hostapi.MachineSpec
	host.createErr = func(spec hostapi.MachineSpec) error { asked = spec; return nil }
	e, st := startEngine(t, host)
	ctx := context.Background()
	sb, vols, err := e.RestoreBase(ctx, sandboxes.BaseRestore{TeamID: "team_1", Base: "dbbase-t-1024m", Template: "postgres", TemplateID: "t",
		Volumes: []sandboxes.BaseVolume{{Name: "db-1", SizeMiB: 1024, MountPath: "/pgdata", Slot: 0}}, ManagedBy: "database:db-1",
		Metadata: map[string]string{"pandastack.database": "db-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if asked.Snapshot == nil || asked.Snapshot.ID != "dbbase-t-1024m" || len(asked.Volumes) != 1 || asked.Volumes[0].ID != vols[0].ID ||
		asked.Volumes[0].SizeMiB != 1024 || asked.Lifetime != pandastack.LifetimeService {
		t.Fatalf("host asked for %+v", asked)
	}
	if sb.TeamID != "team_1" || sb.ManagedBy != "database:db-1" || sb.Lifetime != pandastack.LifetimeService || sb.Metadata["pandastack.database"] != "db-1" {
		t.Fatalf("machine %+v", sb)
	}
	got, err := st.GetVolume(ctx, vols[0].ID)
	if err != nil || got.TeamID != "team_1" || got.Name != "db-1" || got.SandboxID != sb.ID || got.MountPath != "/pgdata" || got.ManagedBy != "database:db-1" {
		t.Fatalf("volume %+v %v", got, err)
	}
}

// A base the host does not have is ENotFound (the caller then starts a
// machine the slow way), and leaves no volume record.
func TestRestoreBaseMissingLeavesNothing(t *testing.T) {
	host := newFakeHost()
	host.createErr = func(spec hostapi.MachineSpec) error {
		return pandastack.Errorf(pandastack.ENotFound, "snapshot %s has no files on this host", spec.Snapshot.ID)
	}
	e, st := startEngine(t, host)
	ctx := context.Background()
	_, _, err := e.RestoreBase(ctx, sandboxes.BaseRestore{TeamID: "team_1", Base: "dbbase-t-1024m", Template: "postgres", TemplateID: "t",
		Volumes: []sandboxes.BaseVolume{{Name: "db-1", SizeMiB: 1024, MountPath: "/pgdata"}}, ManagedBy: "database:db-1"})
	if pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("missing base: %v, want not found", err)
	}
	if vols, err := st.ListVolumes(ctx, "team_1"); err != nil || len(vols) != 0 {
		t.Fatalf("volumes after the failed restore: %+v %v", vols, err)
	}
}
