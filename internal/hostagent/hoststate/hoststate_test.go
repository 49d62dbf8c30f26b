package hoststate_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostagent/hoststate"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// Records round-trip through the directory, a put replaces, a delete
// removes (twice is fine), a half-written file is ignored, and a fresh
// directory says so.
func TestRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "machines")
	d, fresh, err := hoststate.Open(dir)
	if err != nil || !fresh {
		t.Fatalf("open: %v fresh=%v", err, fresh)
	}
	now := time.Now().UTC().Truncate(time.Second)
	a := hoststate.Record{Machine: hostapi.Machine{ID: "sbx_a", State: pandastack.StateRunning, ExpiresAt: now}}
	b := hoststate.Record{Machine: hostapi.Machine{ID: "db_b", Lifetime: pandastack.LifetimeService, State: pandastack.StateHibernated}, Volumes: true}
	for _, r := range []hoststate.Record{a, b} {
		if err := d.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	a.Machine.ExpiresAt = now.Add(time.Hour)
	if err := d.Put(a); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "sbx_c.json.tmp"), []byte("{half"), 0o600)
	if err := d.Put(hoststate.Record{Machine: hostapi.Machine{ID: "../x"}}); err == nil {
		t.Fatal("a record named ../x was written")
	}
	d, fresh, err = hoststate.Open(dir)
	if err != nil || fresh {
		t.Fatalf("reopen: %v fresh=%v", err, fresh)
	}
	got, err := d.List()
	if err != nil || len(got) != 2 || !got["sbx_a"].Machine.ExpiresAt.Equal(now.Add(time.Hour)) ||
		!got["db_b"].Volumes || !got["db_b"].Machine.ExpiresAt.IsZero() {
		t.Fatalf("list: %v %+v", err, got)
	}
	for range 2 {
		if err := d.Delete("sbx_a"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := d.List(); len(got) != 1 {
		t.Fatalf("after delete: %+v", got)
	}
}
