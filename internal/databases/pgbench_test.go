package databases

import (
	"testing"

	"github.com/pandastack/pandastack"
)

// TestParsePgbench reads the figures off pgbench's summary, and refuses an
// output with none.
func TestParsePgbench(t *testing.T) {
	out := `pgbench (17.6 (Debian 17.6-1))
transaction type: <builtin: select only>
scaling factor: 1
query mode: simple
number of clients: 4
number of threads: 1
maximum number of tries: 1
duration: 5 s
number of transactions actually processed: 12345
number of failed transactions: 0 (0.000%)
latency average = 1.620 ms
initial connection time = 12.345 ms
tps = 2469.123456 (without initial connection time)
`
	r, err := ParsePgbench(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.TPS != 2469.123456 || r.Transactions != 12345 || r.LatencyMs != 1.62 || r.Version != "17.6" {
		t.Fatalf("parsed %+v", r)
	}
	if _, err := ParsePgbench("pgbench: error: connection to server failed\n"); err == nil {
		t.Fatal("an output without tps parsed")
	}
}

// TestPgbenchParamsBounds: a run is bounded in clients and seconds, and
// goes inside the machine or over its NIC, nowhere else.
func TestPgbenchParamsBounds(t *testing.T) {
	for _, p := range []PgbenchParams{{Clients: 0, Seconds: 5}, {Clients: 65, Seconds: 5}, {Clients: 4, Seconds: 0}, {Clients: 4, Seconds: 61},
		{Clients: 4, Seconds: 5, Via: "router"}} {
		if err := p.check(); pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("%+v: %v, want invalid", p, err)
		}
	}
	for _, via := range []string{"", ViaInside, ViaNIC} {
		if err := (PgbenchParams{Clients: 4, Seconds: 5, Via: via}).check(); err != nil {
			t.Fatalf("via %q: %v", via, err)
		}
	}
}
