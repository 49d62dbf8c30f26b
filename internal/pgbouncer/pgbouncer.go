// Package pgbouncer holds how PgBouncer is laid out in the postgres
// template (internal/templates installs it; internal/databases writes its
// auth_file and starts it): paths, port and configuration, in one place
// both read.
package pgbouncer

import "fmt"

// Config is where the postgres template keeps the PgBouncer
// configuration a managed database starts its pooler with (it does not
// run in plain postgres sandboxes).
const Config = "/etc/pgbouncer/pandastack.ini"

// Users is the pooler's auth_file. A running managed database keeps it
// empty and looks its clients up in the database (AuthQuery), then logs
// in to PostgreSQL with the client's own SCRAM keys; poolers started
// before that lookup existed have the role's verifier here, and a fork
// of one rewrites it (internal/databases).
const Users = "/var/lib/postgresql/pgbouncer-users.txt"

// PIDFile is where the pooler writes its process id.
const PIDFile = "/var/lib/postgresql/pgbouncer.pid"

// Port is the pooler's port on the machine's loopback.
const Port = 6432

// Ini pools in transaction mode, with prepared statements kept
// per server connection (max_prepared_statements) so drivers that
// prepare still work, and up to 1000 clients.
var Ini = fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=5432

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
max_prepared_statements = 100
ignore_startup_parameters = extra_float_digits,options
logfile = /var/log/postgresql/pgbouncer.log
pidfile = %s
`, Port, Users, PIDFile)
