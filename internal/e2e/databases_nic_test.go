package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// tapBytes is how many bytes the guest of machine id has sent out of its
// NIC: the rx counter of the tap in the machine's network namespace (the
// server records the namespace in DATA/net/ns/ID.json). Bytes that cross
// the guest agent's channel instead never pass there.
func tapBytes(t *testing.T, id string) int64 {
	t.Helper()
	_, n := tapCounter(t, id)
	return n
}

// tapCounter is tapBytes with the namespace it was read in.
func tapCounter(t *testing.T, id string) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(main.dataDir, "net", "ns", id+".json"))
	if err != nil {
		t.Fatalf("machine %s has no network namespace: %v", id, err)
	}
	var rec struct {
		NS string `json:"netns"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.NS == "" {
		t.Fatalf("namespace record of %s: %s (%v)", id, b, err)
	}
	out, err := exec.Command("ip", "netns", "exec", rec.NS, "cat", "/sys/class/net/tap0/statistics/rx_bytes").Output()
	if err != nil {
		t.Fatalf("read the tap's counter in %s: %v", rec.NS, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return rec.NS, n
}

// bigResult is a query whose answer is resultBytes long.
const resultBytes = 8 << 20

var bigResult = "select length(repeat('x', " + strconv.Itoa(resultBytes) + ")) || ':' || repeat('x', " + strconv.Itoa(resultBytes) + ")"

// queryOverNIC runs bigResult with cfg and fails unless the guest sent
// the answer out of its NIC.
func queryOverNIC(t *testing.T, machine string, cfg *pgx.ConnConfig) {
	t.Helper()
	before := tapBytes(t, machine)
	got, err := pgxQuery(t, cfg, bigResult)
	if err != nil {
		t.Fatalf("query through the router: %v", err)
	}
	if !strings.HasPrefix(got, strconv.Itoa(resultBytes)+":") || len(got) < resultBytes {
		t.Fatalf("answer of %d bytes, want %d", len(got), resultBytes)
	}
	if sent := tapBytes(t, machine) - before; sent < resultBytes {
		t.Fatalf("the guest's NIC carried %d bytes of a %d-byte answer: the connection went through the guest agent", sent, resultBytes)
	}
}

// TestDatabaseTrafficOverNIC: the router reaches a database's PostgreSQL
// and its pooler over the machine's own NIC, not through the guest agent
// (the answer's bytes leave the guest by its tap), with the password
// still required there; after a hibernation the waking connection takes
// the new machine's NIC too.
func TestDatabaseTrafficOverNIC(t *testing.T) {
	needTemplate(t, "postgres")
	ctx := context.Background()
	c := teamClient(t, "db-nic")
	d, err := c.CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: "nicpath"})
	if err != nil {
		t.Fatalf("create database: %v\n%s", err, main.tail())
	}
	t.Cleanup(func() { _ = c.DeleteDatabase(context.Background(), d.ID) })
	pooledHost := d.ID + "-pooler.db.localhost"

	t.Run("direct and pooled over the NIC", func(t *testing.T) {
		queryOverNIC(t, d.MachineID, pgxConfig(t, d, ""))
		queryOverNIC(t, d.MachineID, pgxConfigFor(t, d.PooledConnectionURI, pooledHost))
	})
	t.Run("a wrong password is refused on the NIC path", func(t *testing.T) {
		// PostgreSQL says invalid_password; PgBouncer fails the SASL
		// exchange with a protocol violation and "authentication failed".
		for name, c := range map[string]struct {
			cfg  *pgx.ConnConfig
			code string
		}{"direct": {pgxConfig(t, d, ""), "28P01"}, "pooled": {pgxConfigFor(t, d.PooledConnectionURI, pooledHost), "08P01"}} {
			c.cfg.Password = "not-" + d.Password
			_, err := pgxQuery(t, c.cfg, "select 1")
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != c.code || !strings.Contains(pgErr.Message, "authentication failed") {
				t.Fatalf("%s with a wrong password: %v, want SQLSTATE %s, authentication failed", name, err, c.code)
			}
		}
	})
	t.Run("the connection that wakes it goes over the NIC", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		oldNS, oldBytes := tapCounter(t, d.MachineID)
		if _, err := c.HibernateDatabase(ctx, d.ID); err != nil {
			t.Fatalf("hibernate: %v", err)
		}
		// The woken machine keeps its id, with a new VM, usually in a
		// namespace whose tap counted nothing before it: what it counts
		// after the waking connection's answer is that answer.
		got, err := pgxQuery(t, pgxConfig(t, d, ""), bigResult)
		if err != nil || !strings.HasPrefix(got, strconv.Itoa(resultBytes)+":") {
			t.Fatalf("first query after hibernate: %d bytes, %v", len(got), err)
		}
		ns, sent := tapCounter(t, d.MachineID)
		if ns == oldNS {
			sent -= oldBytes
		}
		if sent < resultBytes {
			t.Fatalf("the woken guest's NIC carried %d bytes of a %d-byte answer: the waking connection went through the guest agent", sent, resultBytes)
		}
	})
}
