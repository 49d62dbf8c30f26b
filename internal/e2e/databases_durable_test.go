package e2e

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// checkDataOnVolume: database d has a durable volume of its own, listed
// with the team's volumes at the default size and mounted in its machine
// at /pgdata (that PostgreSQL's data is there, checkKillDuringPgbench
// shows: a restart on a fresh root disk finds every row), and its
// machine is marked as the database's.
func checkDataOnVolume(t *testing.T, c *sdk.Client, d *sdk.Database) {
	t.Helper()
	ctx := context.Background()
	vols, err := c.ListVolumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var vol *sdk.Volume
	for i := range vols {
		if vols[i].ID == d.VolumeID {
			vol = &vols[i]
		}
	}
	if d.VolumeID == "" || vol == nil || vol.Name != d.ID || vol.SizeMiB != 1024 || vol.SandboxID != d.MachineID || vol.MountPath != "/pgdata" ||
		vol.ManagedBy != "database:"+d.ID {
		t.Fatalf("database %s (volume %q): team's volumes %+v", d.ID, d.VolumeID, vols)
	}
	if sb, err := c.GetSandbox(ctx, d.MachineID); err != nil || sb.ManagedBy != "database:"+d.ID {
		t.Fatalf("machine %s of database %s: %+v %v", d.MachineID, d.ID, sb, err)
	}
	// Through the sandbox and volume APIs the team sees them but cannot
	// take them from under the database.
	if err := c.Sandbox(d.MachineID).Kill(ctx); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("killing database %s's machine through the sandbox API: %v, want conflict", d.ID, err)
	}
	if err := c.DeleteVolume(ctx, d.VolumeID); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("deleting database %s's volume through the volume API: %v, want conflict", d.ID, err)
	}
}

// pgbenchConninfo is d's libpq conninfo through the suite's router.
func pgbenchConninfo(d *sdk.Database) string {
	host, port, _ := net.SplitHostPort(main.dbAddr)
	return "host=" + d.Host + " hostaddr=" + host + " port=" + port + " user=" + d.User + " dbname=" + d.Database +
		" sslmode=require connect_timeout=120"
}

// pgbench runs the host's pgbench against d with args.
func pgbench(ctx context.Context, d *sdk.Database, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "pgbench", append(args, pgbenchConninfo(d))...)
	cmd.Env = append(cmd.Environ(), "PGPASSWORD="+d.Password)
	return cmd
}

var processed = regexp.MustCompile(`number of transactions actually processed: (\d+)`)

// checkKillDuringPgbench: pgbench writes to d through the router, d's
// QEMU is killed with SIGKILL mid-run, and the next connection finds the
// database restarted from its volume on a new machine with every
// transaction pgbench saw committed (pgbench_history holds one row per
// commit) and the TPC-B balances consistent. It returns d as it is now.
func checkKillDuringPgbench(t *testing.T, c *sdk.Client, d *sdk.Database) *sdk.Database {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := pgbench(ctx, d, "-i", "-s", "1", "-q", "-I", "dtgp").CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	const clients = 2
	run := pgbench(ctx, d, "-c", strconv.Itoa(clients), "-T", "600", "-n")
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	// Kill once some transactions committed.
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		n, err := strconv.Atoi(mustPsql(t, d, "select count(*) from pgbench_history"))
		if err != nil {
			t.Fatal(err)
		}
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbench committed %d transactions in 3 minutes:\n%s", n, out.String())
		}
	}
	pid := vmPID(main.dataDir, d.MachineID)
	if !qemuRunning(pid) {
		t.Fatalf("no QEMU for machine %s (pid %d)", d.MachineID, pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = run.Process.Kill()
		t.Fatalf("pgbench ran on after its database's VM was killed:\n%s", out.String())
	}
	m := processed.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("pgbench's report:\n%s", out.String())
	}
	committed, _ := strconv.Atoi(m[1])
	t1 := time.Now()
	// The next connection restarts it from its volume.
	got := mustPsql(t, d, "select count(*) from pgbench_history")
	t.Logf("pgbench saw %d commits before the kill; first query after it (restart and recovery included) in %v", committed, time.Since(t1))
	rows, _ := strconv.Atoi(got)
	// A commit whose answer the kill cut off may be there too.
	if rows < committed || rows > committed+clients {
		t.Fatalf("after the restart pgbench_history has %d rows; pgbench saw %d commits (%d clients)\n%s", rows, committed, clients, out.String())
	}
	sums := mustPsql(t, d, "select (select sum(delta) from pgbench_history) = all(array[(select sum(abalance) from pgbench_accounts), "+
		"(select sum(bbalance) from pgbench_branches), (select sum(tbalance) from pgbench_tellers)])")
	if sums != "t" {
		t.Fatalf("balances disagree with the history after the restart")
	}
	after, err := c.GetDatabase(ctx, d.ID)
	if err != nil || after.State != "running" || after.MachineID == d.MachineID || after.VolumeID != d.VolumeID || after.Password != d.Password {
		t.Fatalf("after the restart: %+v %v (before: machine %s volume %s)", after, err, d.MachineID, d.VolumeID)
	}
	if old, err := c.GetSandbox(ctx, d.MachineID); err != nil || old.State != "failed" {
		t.Fatalf("the killed machine: %+v %v", old, err)
	}
	checkDataOnVolume(t, c, after)
	// The pooler came back with it.
	pooled := pgxConfigFor(t, after.PooledConnectionURI, after.ID+"-pooler.db.localhost")
	if n, err := pgxQuery(t, pooled, "select count(*)::text from pgbench_branches"); err != nil || n != "1" {
		t.Fatalf("pooled after the restart: %q %v", n, err)
	}
	return after
}

// checkFork: a fork of running database d has d's rows, its own
// password (d's is refused on it) and volume, the pooler with the new
// password, and writes on either side stay on that side; deleting the
// fork leaves d serving.
func checkFork(t *testing.T, c *sdk.Client, d *sdk.Database) {
	t.Helper()
	ctx := context.Background()
	two := 2
	if _, err := main.client(main.admin).SetTeamQuotas(ctx, "db-owner", sdk.QuotaUpdate{MaxServiceMachines: &two}); err != nil {
		t.Fatal(err)
	}
	mustPsql(t, d, "create table forked (x int); insert into forked values (1), (2)")
	t0 := time.Now()
	f, err := c.ForkDatabase(ctx, d.ID, "orders-fork")
	if err != nil {
		t.Fatalf("fork: %v\n%s", err, main.tail())
	}
	t.Logf("fork answered in %v (first query through the router included)", time.Since(t0))
	defer func() {
		if err := c.DeleteDatabase(context.Background(), f.ID); err != nil {
			t.Errorf("delete the fork: %v", err)
		}
		if _, err := c.GetVolume(context.Background(), f.VolumeID); err == nil {
			t.Errorf("the fork's volume %s outlived it", f.VolumeID)
		}
		if got := mustPsql(t, d, "select count(*) from forked"); got != "3" {
			t.Errorf("the parent after the fork's delete: %q rows", got)
		}
	}()
	if f.ID == d.ID || f.Name != "orders-fork" || f.State != "running" || f.User != d.User || f.Database != d.Database ||
		f.Password == "" || f.Password == d.Password || f.MachineID == d.MachineID || f.VolumeID == "" || f.VolumeID == d.VolumeID {
		t.Fatalf("fork %+v of %+v", f, d)
	}
	checkDataOnVolume(t, c, f)
	if got := mustPsql(t, f, "select count(*) from forked"); got != "2" {
		t.Fatalf("the fork has %q rows, want the parent's 2", got)
	}
	mustPsql(t, f, "insert into forked values (10), (11)")
	mustPsql(t, d, "insert into forked values (3)")
	if got := mustPsql(t, f, "select string_agg(x::text, ',' order by x) from forked"); got != "1,2,10,11" {
		t.Fatalf("the fork's rows: %q", got)
	}
	if got := mustPsql(t, d, "select string_agg(x::text, ',' order by x) from forked"); got != "1,2,3" {
		t.Fatalf("the parent's rows: %q", got)
	}
	conninfo := "host=" + f.Host + " user=" + f.User + " dbname=" + f.Database + " sslmode=require"
	if _, stderr, ok := psqlRun(t, conninfo, d.Password, "select 1"); ok || !strings.Contains(stderr, "password authentication failed") {
		t.Fatalf("the parent's password on the fork: ok=%v %s", ok, stderr)
	}
	pooled := pgxConfigFor(t, f.PooledConnectionURI, f.ID+"-pooler.db.localhost")
	if n, err := pgxQuery(t, pooled, "select count(*)::text from forked"); err != nil || n != "4" {
		t.Fatalf("the fork's pooler: %q %v", n, err)
	}
	pooled.Password = d.Password
	if _, err := pgxQuery(t, pooled, "select 1"); err == nil {
		t.Fatalf("the parent's password opens the fork's pooler")
	}
	checkSQLAfterFork(t, d, f)
	// The tenant changes the fork's password inside: the pooler follows at
	// once (it looks the role up), the old password opens neither path.
	changed := "changed-" + f.Password[:12]
	mustPsql(t, f, "alter role "+f.User+" password '"+changed+"'")
	pooled.Password = changed
	if n, err := pgxQuery(t, pooled, "select count(*)::text from forked"); err != nil || n != "4" {
		t.Fatalf("the fork's pooler with the password the tenant set: %q %v", n, err)
	}
	pooled.Password = f.Password
	if _, err := pgxQuery(t, pooled, "select 1"); err == nil {
		t.Fatalf("the fork's pooler still takes the password the tenant changed")
	}
	if _, stderr, ok := psqlRun(t, conninfo, changed, "select 1"); !ok {
		t.Fatalf("the password the tenant set, directly: %s", stderr)
	}
	if _, err := c.ForkDatabase(ctx, d.ID, "orders-fork"); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("a fork with a taken name: %v", err)
	}
	if vols, err := c.ListVolumes(ctx); err != nil || len(vols) != 2 {
		t.Fatalf("after a refused fork the team has volumes %+v %v", vols, err)
	}
}
