package databases

import (
	"strings"
	"testing"
)

// A copy's rekey as its role sets the verifier and ends the role's other
// sessions in one simple query; inside the machine the psql script stops
// at the first error and does not quote a failing statement; only a
// legacy pooler's rekey writes the auth_file and signals PgBouncer.
func TestRekeySQL(t *testing.T) {
	const v = "SCRAM-SHA-256$4096:c2FsdA==$a:b"
	alter := `ALTER ROLE "orders_owner" PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$a:b';`
	term := `pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = 'orders_owner' AND pid <> pg_backend_pid();`
	authFile := `COPY (SELECT '"orders_owner" "SCRAM-SHA-256$4096:c2FsdA==$a:b"') TO '/var/lib/postgresql/pgbouncer-users.txt';`
	role := rekeyRoleSQL("orders_owner", v)
	for _, want := range []string{alter, term} {
		if !strings.Contains(role, want) {
			t.Errorf("rekey as the role lacks %q:\n%s", want, role)
		}
	}
	if strings.Contains(role, "COPY") || strings.Contains(role, `\set`) {
		t.Errorf("rekey as the role writes files or holds psql commands:\n%s", role)
	}
	inside := rekeyInsideSQL("orders_owner", v, false)
	for _, want := range []string{"\\set ON_ERROR_STOP 1\n", "\\set VERBOSITY terse\n", alter, term} {
		if !strings.Contains(inside, want) {
			t.Errorf("rekey inside lacks %q:\n%s", want, inside)
		}
	}
	if strings.Contains(inside, "pgbouncer") {
		t.Errorf("rekey inside touches the pooler:\n%s", inside)
	}
	legacy := rekeyInsideSQL("orders_owner", v, true)
	for _, want := range []string{alter, authFile, "TO PROGRAM 'kill -HUP $(cat /var/lib/postgresql/pgbouncer.pid)'"} {
		if !strings.Contains(legacy, want) {
			t.Errorf("legacy rekey lacks %q:\n%s", want, legacy)
		}
	}
}
