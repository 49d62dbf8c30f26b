package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestDatabasesFromBase: once the server has made a database, a create
// restores the machine it saved then (PostgreSQL already running from a
// volume) with a copy-on-write copy of that volume kept as the new
// database's own. Such a database is as one started cold: its own
// volume, role, password and data (another database's password is
// refused, its tables are not there), the base's empty database and its
// loopback trust gone, PgBouncer serving its password; and its data is
// durable: a SIGKILL of its QEMU loses no committed row, the next
// connection restarts it from its volume.
func TestDatabasesFromBase(t *testing.T) {
	needTemplate(t, "postgres")
	ctx := context.Background()
	c := teamClient(t, "db-base")
	two := 2
	if _, err := main.client(main.admin).SetTeamQuotas(ctx, "db-base", sdk.QuotaUpdate{MaxServiceMachines: &two}); err != nil {
		t.Fatal(err)
	}
	var dbs []*sdk.Database
	for _, name := range []string{"alpha", "beta"} {
		t0 := time.Now()
		d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: name})
		if err != nil {
			t.Fatalf("create %s: %v\n%s", name, err, main.tail())
		}
		t.Logf("create %s answered in %v (first query through the router included)", name, time.Since(t0))
		dbs = append(dbs, d)
		t.Cleanup(func() {
			if err := c.DeleteDatabase(context.Background(), d.ID); err != nil {
				t.Errorf("delete %s: %v", d.Name, err)
			}
		})
	}
	a, b := dbs[0], dbs[1]
	// The second create came from the base the first (or an earlier
	// database on this server) left.
	lines := main.logLines("database=" + b.ID)
	created := ""
	for _, l := range lines {
		if strings.Contains(l, `msg="database created"`) && strings.Contains(l, " from=") { // the service's line, not the API's
			created = l
		}
	}
	if !strings.Contains(created, "from=base") {
		t.Fatalf("%s was not restored from the base: %q", b.Name, created)
	}
	t.Logf("%s", created)

	for _, d := range dbs {
		checkDataOnVolume(t, c, d)
		if got := mustPsql(t, d, "select current_user || ' ' || current_database() || ' ' || (select rolsuper from pg_roles where rolname = current_user) || ' ' || "+
			"(select string_agg(datname, ',' order by datname) from pg_database)"); got != d.User+" "+d.Name+" false "+d.Name+",postgres,template0,template1" {
			t.Fatalf("%s: %q", d.Name, got)
		}
	}
	if a.VolumeID == b.VolumeID || a.MachineID == b.MachineID || a.Password == b.Password {
		t.Fatalf("two databases share a volume, machine or password: %+v %+v", a, b)
	}
	mustPsql(t, a, "create table only_a (x int); insert into only_a values (1)")
	if got := mustPsql(t, b, "select count(*) from pg_class where relname = 'only_a'"); got != "0" {
		t.Fatalf("%s sees %s's table", b.Name, a.Name)
	}
	for _, tc := range []struct{ name, user, password string }{
		{"the other database's password", b.User, a.Password},
		{"the postgres superuser (the base trusted it on loopback)", "postgres", b.Password},
	} {
		conninfo := "host=" + b.Host + " user=" + tc.user + " dbname=" + b.Database + " sslmode=require"
		if _, stderr, ok := psqlRun(t, conninfo, tc.password, "select 1"); ok || !strings.Contains(stderr, "password authentication failed") {
			t.Errorf("%s on %s: ok=%v %s", tc.name, b.Name, ok, stderr)
		}
	}
	pooled := pgxConfigFor(t, b.PooledConnectionURI, b.ID+"-pooler.db.localhost")
	if got, err := pgxQuery(t, pooled, "select current_user::text"); err != nil || got != b.User {
		t.Fatalf("%s through the pooler: %q %v", b.Name, got, err)
	}

	// Durable: committed rows outlive a SIGKILL of the machine.
	mustPsql(t, b, "create table kept as select g as x from generate_series(1, 1000) g")
	pid := vmPID(main.dataDir, b.MachineID)
	if !qemuRunning(pid) {
		t.Fatalf("no QEMU for machine %s (pid %d)", b.MachineID, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := mustPsql(t, b, "select sum(x) from kept"); got != "500500" {
		t.Fatalf("%s's rows after its QEMU was killed: %q", b.Name, got)
	}
	after, err := c.GetDatabase(ctx, b.ID)
	if err != nil || after.State != "running" || after.MachineID == b.MachineID || after.VolumeID != b.VolumeID {
		t.Fatalf("after the restart: %+v %v (before: machine %s volume %s)", after, err, b.MachineID, b.VolumeID)
	}
	pooled = pgxConfigFor(t, after.PooledConnectionURI, after.ID+"-pooler.db.localhost")
	if got, err := pgxQuery(t, pooled, "select count(*)::text from kept"); err != nil || got != "1000" {
		t.Fatalf("%s through the pooler after the restart: %q %v", b.Name, got, err)
	}
}
