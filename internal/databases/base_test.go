package databases

import (
	"strings"
	"testing"
)

// A tenant cannot name a database after the base's empty one, which a
// create renames to the tenant's name.
func TestBaseDBIsNoTenantName(t *testing.T) {
	if checkName(BaseDB) == nil {
		t.Fatalf("%q is a valid database name: a tenant could take the base's", BaseDB)
	}
}

// The claim is one DO block: the role from its verifier, the base's
// database renamed and given to it, PgBouncer's auth_file, the hba that
// ends the loopback trust, a reload of both.
func TestClaimSQL(t *testing.T) {
	v := "SCRAM-SHA-256$4096:c2FsdA==$a:b"
	q := claimSQL("orders_owner", v, "orders")
	if !strings.HasPrefix(q, "DO $pandastack$ BEGIN\n") || !strings.HasSuffix(q, "\nEND $pandastack$") || strings.Count(q, "$pandastack$") != 2 {
		t.Fatalf("not one DO block:\n%s", q)
	}
	for _, want := range []string{
		`CREATE ROLE "orders_owner" LOGIN PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$a:b';`,
		`ALTER DATABASE "_pandastack_new" RENAME TO "orders";`,
		`ALTER DATABASE "orders" OWNER TO "orders_owner";`,
		// The COPY statements run through EXECUTE: quoted once more.
		`EXECUTE 'COPY (SELECT ''"orders_owner" "SCRAM-SHA-256$4096:c2FsdA==$a:b"'') TO ''/var/lib/postgresql/pgbouncer-users.txt''';`,
		`''host    all   all        127.0.0.1/32   scram-sha-256''`,
		`|| quote_literal(current_setting('hba_file'));`,
		"PERFORM pg_reload_conf();",
		`EXECUTE 'COPY (SELECT 1) TO PROGRAM ''kill -HUP $(cat /var/lib/postgresql/pgbouncer.pid)''';`,
	} {
		if !strings.Contains(q, want) {
			t.Errorf("claim lacks %s\n%s", want, q)
		}
	}
	// A name with a quote stays one identifier (names are validated, but
	// the quoting does not rely on it).
	if q := claimSQL(`a"b_owner`, v, `a"b`); !strings.Contains(q, `CREATE ROLE "a""b_owner"`) {
		t.Errorf("identifier not quoted:\n%s", q)
	}
}

func TestBaseIDNamesBuildAndSize(t *testing.T) {
	if a, b := baseID("t1", 1024), baseID("t2", 1024); a == b {
		t.Fatalf("two builds share base %s", a)
	}
	if a, b := baseID("t1", 1024), baseID("t1", 2048); a == b {
		t.Fatalf("two sizes share base %s", a)
	}
}
