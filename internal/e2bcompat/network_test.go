package e2bcompat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

func TestEgressPolicyFromE2BOptions(t *testing.T) {
	no, yes := false, true
	for _, tc := range []struct {
		name              string
		allowOut, denyOut []string
		internet          *bool
		want              *pandastack.NetworkPolicy
		err               string
	}{
		{name: "nothing asked: the server's default", want: nil},
		{name: "internet access on (SDKs up to 2.50 always send it)", internet: &yes, want: nil},
		{name: "internet access off", internet: &no, want: &pandastack.NetworkPolicy{Egress: "deny"}},
		{name: "deny all is internet access off", denyOut: []string{"0.0.0.0/0"}, want: &pandastack.NetworkPolicy{Egress: "deny"}},
		{name: "deny all but addresses and names", denyOut: []string{"0.0.0.0/0"}, allowOut: []string{"10.1.2.3", "203.0.113.0/24", "api.example.com", "*.npmjs.org"},
			want: &pandastack.NetworkPolicy{Egress: "deny", AllowCIDRs: []string{"10.1.2.3/32", "203.0.113.0/24"}, AllowDomains: []string{"api.example.com", "*.npmjs.org"}}},
		{name: "allowOut wins over internet access off", internet: &no, allowOut: []string{"198.51.100.7"},
			want: &pandastack.NetworkPolicy{Egress: "deny", AllowCIDRs: []string{"198.51.100.7/32"}}},
		{name: "allowOut everything wins over denyOut", denyOut: []string{"0.0.0.0/0"}, allowOut: []string{"0.0.0.0/0"}, want: nil},
		{name: "deny some addresses", denyOut: []string{"198.51.100.0/24", "203.0.113.9"},
			want: &pandastack.NetworkPolicy{Egress: "allow", DenyCIDRs: []string{"198.51.100.0/24", "203.0.113.9/32"}}},
		{name: "allowOut outside the denied ranges changes nothing", denyOut: []string{"198.51.100.0/24"}, allowOut: []string{"203.0.113.1"},
			want: &pandastack.NetworkPolicy{Egress: "allow", DenyCIDRs: []string{"198.51.100.0/24"}}},
		{name: "a hole in a denied range", denyOut: []string{"198.51.100.0/24"}, allowOut: []string{"198.51.100.7"}, err: `network.allowOut "198.51.100.7" opens part of denyOut "198.51.100.0/24"`},
		{name: "a domain in denyOut", denyOut: []string{"example.com"}, err: `network.denyOut entry "example.com" is a domain`},
		{name: "a bad domain", denyOut: []string{"0.0.0.0/0"}, allowOut: []string{"*"}, err: "network: allow_domains entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := egressPolicy(tc.allowOut, tc.denyOut, tc.internet)
			if tc.err != "" {
				if pandastack.ErrorCode(err) != pandastack.EInvalid || !strings.Contains(pandastack.ErrorMessage(err), tc.err) {
					t.Fatalf("got %+v, %v; want an invalid-argument error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestUnsupportedNetworkOptionsAreRefused(t *testing.T) {
	for body, bad := range map[string]bool{`{}`: false, `{"rules": null}`: false, `{"rules": {}}`: false,
		`{"rules": {"api.example.com": [{"transform": {"headers": {"x": "y"}}}]}}`: true, `{"egressProxy": {"address": "proxy:8080"}}`: true} {
		var n networkRequest
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			t.Fatal(err)
		}
		if err := n.unsupported(); (err != nil) != bad {
			t.Errorf("%s: %v", body, err)
		}
	}
}

func TestParseSample(t *testing.T) {
	out := `cpu  100 0 100 800 0 0 0 0 0 0
cpu  150 0 150 900 0 0 0 0 0 0
MemTotal:         500000 kB
MemFree:          100000 kB
MemAvailable:     300000 kB
Cached:            50000 kB
Filesystem     1-byte-blocks      Used  Available Capacity Mounted on
/dev/root         2000000000 500000000 1500000000      25% /
`
	m, err := parseSample([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := metric{CPUUsedPct: 50, MemTotal: 500000 << 10, MemUsed: 200000 << 10, MemCache: 50000 << 10, DiskTotal: 2000000000, DiskUsed: 500000000}
	if m != want {
		t.Fatalf("got %+v\nwant %+v", m, want)
	}
	if _, err := parseSample([]byte("cpu 1 2 3 4\n")); err == nil {
		t.Fatal("an incomplete sample parsed")
	}
}
