package databases

import (
	"strings"
	"testing"
)

// The verifier matches RFC 7677's test vector's shape and PostgreSQL's
// format, and a password yields a different verifier under another salt.
func TestSCRAMVerifier(t *testing.T) {
	v, err := scramVerifier("pencil", []byte("0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "SCRAM-SHA-256$4096:MDEyMzQ1Njc4OWFiY2RlZg==$") || strings.Count(v, ":") != 2 {
		t.Fatalf("verifier %q", v)
	}
	w, _ := scramVerifier("pencil", []byte("fedcba9876543210"))
	if v == w {
		t.Fatal("salt ignored")
	}
}

func TestNamesAndPasswords(t *testing.T) {
	for _, ok := range []string{"orders", "a", "my-db_2"} {
		if err := checkName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Orders", "1db", "a b", `a"b`, "a;drop", strings.Repeat("a", 41)} {
		if err := checkName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	p := newPassword()
	if len(p) < 40 || strings.ContainsAny(p, "@:/?#%") {
		t.Fatalf("password %q", p)
	}
	if got := connectionURI("orders_owner", p, "db-1.db.localhost", 5433, "orders"); got != "postgres://orders_owner:"+p+"@db-1.db.localhost:5433/orders?sslmode=require" {
		t.Fatalf("uri %s", got)
	}
}
