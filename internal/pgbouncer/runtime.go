package pgbouncer

import (
	"fmt"
	"strings"

	"github.com/pandastack/pandastack/internal/network"
)

// A managed database's pooler runs with RuntimeIni, which the databases
// service writes to RuntimeConfig at each start of PgBouncer: the
// template's Ini (kept as baked, so the template's image does not change)
// with room for more clients than the product promises (1,000 idle ones
// and the connections opened next to them), under a file descriptor limit
// that holds them all.

// RuntimeConfig is where the running pooler's configuration is written.
const RuntimeConfig = "/var/lib/postgresql/pgbouncer.ini"

// MaxClients is the pooler's max_client_conn: 1,000 idle clients held
// open with room for new ones beside them.
const MaxClients = 2000

// FileLimit is the open file limit the pooler starts under: a descriptor
// per client and per server connection, and its own few. The default
// limit of a process in the machine (1,024) stops it near 1,000 clients.
const FileLimit = 8192

// RuntimeListen is the running pooler's listen_addr: the loopback (the
// guest agent's path) and the machine's NIC address (the same in every
// sandbox), where the router connects from the machine's namespace
// (internal/nicroute). A machine without a NIC has no such address:
// PgBouncer then listens on the loopback alone.
const RuntimeListen = "127.0.0.1," + network.GuestAddr

// RuntimeIni is Ini with max_client_conn set to MaxClients and
// listen_addr to RuntimeListen.
var RuntimeIni = strings.NewReplacer(
	"max_client_conn = 1000\n", fmt.Sprintf("max_client_conn = %d\n", MaxClients),
	"listen_addr = 127.0.0.1\n", "listen_addr = "+RuntimeListen+"\n",
).Replace(Ini)
