package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// idleClients is how many client connections the pooler holds open at
// once: the product's promise for a 512 MiB database.
const idleClients = 1000

// TestDatabasePoolerThousandClients: a database on a 512 MiB machine holds
// 1,000 idle client connections through the router (real TLS, pgx) to its
// PgBouncer at once; a new client still gets an answer while they are
// open, every one of the 1,000 still runs a query, and once they are
// closed the pooler takes new clients as before. It logs the memory of
// the database's QEMU and of the server with the 1,000 open.
func TestDatabasePoolerThousandClients(t *testing.T) {
	needTemplate(t, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := teamClient(t, "db-pool")
	d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "crowd"})
	if err != nil {
		t.Fatalf("create database: %v\n%s", err, main.tail())
	}
	t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), d.ID) })
	sb, err := c.GetSandbox(ctx, d.MachineID)
	if err != nil {
		t.Fatalf("the database's machine: %v", err)
	}
	if sb.MemoryMiB != 512 {
		t.Fatalf("the database's machine has %d MiB, the test is for 512", sb.MemoryMiB)
	}
	pooledHost := d.ID + "-pooler.db.localhost"
	cfg := pgxConfigFor(t, d.PooledConnectionURI, pooledHost)
	// A client the pooler cannot take waits in its listen backlog: bound
	// that wait (a liveness bound, far above a connect's seconds here) so
	// a pooler out of file descriptors fails the test, not stalls it.
	cfg.ConnectTimeout = 2 * time.Minute
	qemu := vmPID(main.dataDir, d.MachineID)
	qemuBefore, dirtyBefore, serverBefore := rssKB(qemu), dirtyKB(qemu), rssKB(main.cmd.Process.Pid)

	conns := make([]*pgx.Conn, idleClients)
	t.Cleanup(func() {
		for _, conn := range conns {
			if conn != nil {
				conn.Close(context.Background())
			}
		}
	})
	t0 := time.Now()
	if err := inBatches(idleClients, 50, func(i int) error {
		conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
		if err != nil {
			return fmt.Errorf("client %d: connect through the pooler: %w", i, err)
		}
		conns[i] = conn
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, main.tail())
	}
	t.Logf("%d clients connected through the router to the pooler in %v", idleClients, time.Since(t0))

	t.Run("a new client answers while 1,000 are open", func(t *testing.T) {
		got, err := pgxQuery(t, cfg.Copy(), "select 'still here'")
		if err != nil || got != "still here" {
			t.Fatalf("new client beside %d open ones: %q %v", idleClients, got, err)
		}
	})

	t.Logf("memory with %d clients open: database QEMU RSS %d MiB (before %d MiB), of it written by the guest %d MiB (before %d MiB); server RSS %d MiB (before %d MiB)",
		idleClients, rssKB(qemu)/1024, qemuBefore/1024, dirtyKB(qemu)/1024, dirtyBefore/1024, rssKB(main.cmd.Process.Pid)/1024, serverBefore/1024)

	t.Run("every one of the 1,000 still runs a query", func(t *testing.T) {
		t0 := time.Now()
		if err := inBatches(idleClients, 50, func(i int) error {
			var n int
			if err := conns[i].QueryRow(ctx, "select $1::int + 1", i).Scan(&n); err != nil || n != i+1 {
				return fmt.Errorf("client %d: select: %d %v", i, n, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d queries, one per open client, in %v", idleClients, time.Since(t0))
	})

	for i, conn := range conns {
		if err := conn.Close(ctx); err != nil {
			t.Errorf("close client %d: %v", i, err)
		}
		conns[i] = nil
	}
	t.Run("after they closed, new clients are served", func(t *testing.T) {
		if got, err := pgxQuery(t, cfg.Copy(), "select current_user"); err != nil || got != d.User {
			t.Fatalf("after closing: %q %v", got, err)
		}
	})
}

// inBatches runs f(0..n-1), batch at a time in parallel, and returns the
// first error.
func inBatches(n, batch int, f func(i int) error) error {
	for start := 0; start < n; start += batch {
		var wg sync.WaitGroup
		errs := make(chan error, batch)
		for i := start; i < min(start+batch, n); i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(i); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// rssKB is process pid's resident set size in KiB (0 when unknown).
func rssKB(pid int) int64 { return procKB(pid, "status", "VmRSS:") }

// dirtyKB is what process pid wrote of its memory itself (Private_Dirty:
// for a VM, the pages its guest changed since the snapshot it was
// restored from), in KiB.
func dirtyKB(pid int) int64 { return procKB(pid, "smaps_rollup", "Private_Dirty:") }

// procKB reads the "field N kB" line of /proc/pid/file (0 when unknown).
func procKB(pid int, file, field string) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
