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

// SocketDir is where PostgreSQL's local socket is in the postgres
// template (Debian's unix_socket_directories). The running pooler
// reaches the server there: as the postgres OS user it logs in as the
// postgres role by peer, with no password anywhere (AuthUser).
const SocketDir = "/var/run/postgresql"

// AuthUser is the role the running pooler looks up its clients' SCRAM
// verifiers as (AuthQuery, in database postgres), so its auth_file stays
// empty: a client's password is checked against the role's verifier in
// the database at that moment. A password the tenant changes with ALTER
// ROLE works through the pooler at once, and a fork or a restore that
// gives its copy a new password has no file to rewrite and no pooler to
// signal.
const AuthUser = "postgres"

// AuthQuery finds a login role's verifier; a role past its VALID UNTIL,
// or with no password (the postgres superuser), gets none and cannot log
// in through the pooler.
const AuthQuery = "SELECT rolname, CASE WHEN rolvaliduntil < now() THEN NULL ELSE rolpassword END FROM pg_authid WHERE rolname = $1 AND rolcanlogin"

// runtimeAuth is what the running pooler adds after its auth_file line.
var runtimeAuth = fmt.Sprintf("auth_user = %s\nauth_dbname = postgres\nauth_query = %s\n", AuthUser, AuthQuery)

// RuntimeIni is Ini with max_client_conn set to MaxClients, listen_addr
// to RuntimeListen, the server reached on SocketDir and clients looked up
// with AuthQuery.
var RuntimeIni = strings.NewReplacer(
	"max_client_conn = 1000\n", fmt.Sprintf("max_client_conn = %d\n", MaxClients),
	"listen_addr = 127.0.0.1\n", "listen_addr = "+RuntimeListen+"\n",
	"* = host=127.0.0.1 port=5432\n", "* = host="+SocketDir+" port=5432\n",
	"auth_file = "+Users+"\n", "auth_file = "+Users+"\n"+runtimeAuth,
).Replace(Ini)
