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

// The claim is one simple query: the role from its verifier, the base's
// database renamed and given to it, the hba that ends the loopback trust
// and asks a password over TCP (from the loopback and from the router on
// the NIC alike) and on the local socket from all but postgres, the
// configuration reloaded. PgBouncer's auth_file is not written: the
// pooler looks the role up.
func TestClaimSQL(t *testing.T) {
	v := "SCRAM-SHA-256$4096:c2FsdA==$a:b"
	q := claimSQL("orders_owner", v, "orders")
	want := []string{
		`CREATE ROLE "orders_owner" LOGIN PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$a:b'`,
		`ALTER DATABASE "_pandastack_new" RENAME TO "orders"`,
		`ALTER DATABASE "orders" OWNER TO "orders_owner"`,
		`COPY (SELECT unnest(ARRAY['# PandaStack managed database (internal/databases): passwords over TCP.', 'local   all   postgres                  peer', ` +
			`'local   all   all                       scram-sha-256', ` +
			`'host    all   all        127.0.0.1/32   scram-sha-256', 'host    all   all        ::1/128        scram-sha-256', ` +
			`'host    all   all        172.16.0.1/32  scram-sha-256'])) TO '/etc/postgresql/17/main/pg_hba.conf'`,
		"SELECT pg_reload_conf()",
	}
	if got := strings.Split(q, ";\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("claim:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
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
