package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestBenchDatabaseFloors: the admin routes `bench --databases` measures
// its floors with. A fork floor forks the database's machine, answers its
// parts (the fork, then the child's first query) and leaves no child
// machine or volume behind; pgbench over the machine's NIC (the server's
// host in its network namespace, no router) runs and reports; a team key
// is refused and a pgbench path that is not one is a bad request.
func TestBenchDatabaseFloors(t *testing.T) {
	needTemplate(t, "postgres")
	ctx := context.Background()
	admin := main.client(main.admin)
	d, err := admin.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "floors"})
	if err != nil {
		t.Fatalf("create database: %v\n%s", err, main.tail())
	}
	t.Cleanup(func() { _ = admin.DeleteDatabase(context.Background(), d.ID) })

	f, err := admin.BenchDatabaseForkFloor(ctx, d.ID)
	if err != nil {
		t.Fatalf("fork floor: %v\n%s", err, main.tail())
	}
	if f.ForkMs <= 0 || f.FirstQueryMs <= 0 || f.TotalMs < f.ForkMs {
		t.Fatalf("fork floor figures are not sane: %+v", f)
	}
	live, err := admin.ListSandboxes(ctx, sdk.ListParams{Metadata: map[string]string{"pandastack.bench": "db-fork-floor"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range live {
		t.Errorf("the fork floor's child %s is left running (%s)", sb.ID, sb.State)
	}
	vols, err := admin.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parentVol := false
	for _, v := range vols {
		parentVol = parentVol || v.Name == d.ID
		if strings.HasPrefix(v.Name, "dbfloor-") {
			t.Errorf("the fork floor's volume %s (%s) is left behind", v.Name, v.ID)
		}
	}
	if !parentVol {
		t.Fatalf("the database's own volume %s is not in the team's volume list, so the list cannot show a floor's: %+v", d.ID, vols)
	}

	if out, err := pgbench(ctx, d, "-i", "-q", "-s", "1").CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	p, err := admin.BenchDatabasePgbench(ctx, d.ID, sdk.PgbenchParams{Clients: 2, Seconds: 2, SelectOnly: true, Via: "nic"})
	if err != nil {
		t.Fatalf("pgbench over the NIC: %v\n%s", err, main.tail())
	}
	if p.TPS <= 0 || p.Transactions <= 0 {
		t.Fatalf("pgbench over the NIC reported %+v", p)
	}
	t.Logf("fork floor %.0f ms (fork %.0f, first query %.0f); pgbench over the NIC %.0f tps", f.TotalMs, f.ForkMs, f.FirstQueryMs, p.TPS)

	other := teamClient(t, "dbfloor-other")
	var ae *sdk.APIError
	if _, err := other.BenchDatabaseForkFloor(ctx, d.ID); !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		t.Errorf("a team key's fork floor: %v; want 403", err)
	}
	if _, err := admin.BenchDatabasePgbench(ctx, d.ID, sdk.PgbenchParams{Clients: 2, Seconds: 2, Via: "router"}); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("pgbench via router: %v; want 400", err)
	}
}
