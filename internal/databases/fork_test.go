package databases

import (
	"strings"
	"testing"
)

// The fork's rekey script stops at the first error, does not quote a
// failing statement, and sets the verifier on the role and in
// PgBouncer's auth_file.
func TestRekeySQL(t *testing.T) {
	q := rekeySQL("orders_owner", "SCRAM-SHA-256$4096:c2FsdA==$a:b")
	for _, want := range []string{"\\set ON_ERROR_STOP 1\n", "\\set VERBOSITY terse\n",
		`ALTER ROLE "orders_owner" PASSWORD 'SCRAM-SHA-256$4096:c2FsdA==$a:b';`,
		`COPY (SELECT '"orders_owner" "SCRAM-SHA-256$4096:c2FsdA==$a:b"') TO '/var/lib/postgresql/pgbouncer-users.txt';`} {
		if !strings.Contains(q, want) {
			t.Errorf("rekey script lacks %q:\n%s", want, q)
		}
	}
}
