package databases

import (
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/network"
)

// TestNICListen: PostgreSQL starts listening on the machine's NIC
// address besides the loopback, after a point-in-time restore too (the router connects there), and every
// TCP entry of the hba, the NIC's included, asks the role's password: the
// NIC path trusts nobody the loopback path would not.
func TestNICListen(t *testing.T) {
	for name, script := range map[string]string{"start on the volume": dataScript, "point-in-time restore": recoverScript} {
		if !strings.Contains(script, `-o "-c config_file=$conf -c listen_addresses=localhost,`+network.GuestAddr+`"`) {
			t.Errorf("%s: the cluster does not listen on %s:\n%s", name, network.GuestAddr, script)
		}
	}
	gateway := false
	for _, l := range hbaLines {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "#" || f[0] == "local" {
			continue
		}
		if f[0] != "host" || f[len(f)-1] != "scram-sha-256" {
			t.Errorf("hba line %q: want host ... scram-sha-256", l)
		}
		if f[3] == network.GatewayAddr+"/32" {
			gateway = true
		}
	}
	if !gateway {
		t.Errorf("no hba line for the router's address %s: its connections would be refused", network.GatewayAddr)
	}
}
