package sqlite

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

func TestDatabaseRecords(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	at := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	d := pandastack.Database{ID: "db-1", TeamID: "team_a", Name: "orders", State: pandastack.DatabaseCreating,
		User: "orders_owner", PasswordSealed: "sealed", DBName: "orders", CreatedAt: at}
	if err := s.CreateDatabase(ctx, d); err != nil {
		t.Fatal(err)
	}
	dup := d
	dup.ID = "db-2"
	if err := s.CreateDatabase(ctx, dup); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Fatalf("same name in the team: %v, want conflict", err)
	}
	other := dup
	other.TeamID = "team_b"
	if err := s.CreateDatabase(ctx, other); err != nil {
		t.Fatalf("same name in another team: %v", err)
	}
	if err := s.UpdateDatabase(ctx, "db-1", pandastack.DatabaseReady, "sbx_1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDatabase(ctx, "db-1")
	if err != nil {
		t.Fatal(err)
	}
	d.State, d.MachineID = pandastack.DatabaseReady, "sbx_1"
	if err := s.SetDatabaseVolume(ctx, "db-1", "vol_1"); err != nil {
		t.Fatal(err)
	}
	if got, err = s.GetDatabase(ctx, "db-1"); err != nil {
		t.Fatal(err)
	}
	d.VolumeID = "vol_1"
	if got != d {
		t.Fatalf("got %+v, want %+v", got, d)
	}
	list, err := s.ListDatabases(ctx, "team_a")
	if err != nil || len(list) != 1 || list[0].ID != "db-1" {
		t.Fatalf("team_a's list: %v %v", list, err)
	}
	if all, _ := s.ListDatabases(ctx, ""); len(all) != 2 {
		t.Fatalf("every team's list has %d", len(all))
	}
	if err := s.DeleteDatabase(ctx, "db-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetDatabase(ctx, "db-1"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("after delete: %v", err)
	}
	if err := s.UpdateDatabase(ctx, "db-1", pandastack.DatabaseReady, ""); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("update a deleted one: %v", err)
	}
	if err := s.SetDatabaseVolume(ctx, "db-1", "vol_2"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("set the volume of a deleted one: %v", err)
	}
}
