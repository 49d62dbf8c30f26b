package databases

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/pgbouncer"
)

// hbaLines replace the template's trust-everything pg_hba.conf in a
// database's machine: over TCP (how the router reaches it) every role
// logs in with its password; the postgres superuser only over the local
// socket, as the postgres OS user (PgBouncer's lookup of its clients,
// pgbouncer.AuthUser, among them). Other roles on the local socket (the
// pooler's server connections) give their password too. TCP comes from
// the loopback (through the guest agent) or from the machine's gateway
// on its NIC (the router's socket in the machine's network namespace,
// internal/nicroute): nothing else can open a connection to the guest's
// address.
var hbaLines = []string{
	"# PandaStack managed database (internal/databases): passwords over TCP.",
	"local   all   postgres                  peer",
	"local   all   all                       scram-sha-256",
	"host    all   all        127.0.0.1/32   scram-sha-256",
	"host    all   all        ::1/128        scram-sha-256",
	"host    all   all        " + network.GatewayAddr + "/32  scram-sha-256",
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes a PostgreSQL string literal.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// setupSQL makes the tenant's role (from its SCRAM verifier) and its
// database.
func setupSQL(user, verifier, db string) []string {
	return []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s", quoteIdent(user), quoteLiteral(verifier)),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", quoteIdent(db), quoteIdent(user)),
	}
}

// hbaSQL writes hbaLines over the server's hba_file (one COPY row per
// line: none holds a tab or a backslash) and reloads the configuration.
func hbaSQL(hbaFile string) []string {
	quoted := make([]string, len(hbaLines))
	for i, l := range hbaLines {
		quoted[i] = quoteLiteral(l)
	}
	return []string{
		fmt.Sprintf("COPY (SELECT unnest(ARRAY[%s])) TO %s", strings.Join(quoted, ", "), quoteLiteral(hbaFile)),
		"SELECT pg_reload_conf()",
	}
}

// setup configures database d's machine with password: as the postgres
// superuser, whom the template still trusts on the machine's loopback
// (reached through the guest agent: no psql started in the guest), it
// makes the role and the database when the cluster (on the volume) has
// none yet — a machine restarted on its volume finds them — leaves
// PgBouncer's auth_file empty (it looks clients up), then turns that
// trust off; last it starts PgBouncer. The root disk's configuration is the
// template's again after a restart, so all but the role runs every time.
func (s *Service) setup(ctx context.Context, d pandastack.Database, password string) error {
	conn, err := s.superuser(ctx, d.MachineID)
	if err != nil {
		return fmt.Errorf("set up database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var hbaFile string
	if err := conn.QueryRow(ctx, "SHOW hba_file").Scan(&hbaFile); err != nil {
		return fmt.Errorf("set up database: find hba_file: %w", err)
	}
	var qs []string
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", d.User).Scan(&exists)
	switch {
	case err != nil:
		return fmt.Errorf("set up database: find role: %w", err)
	case !exists:
		verifier, err := newVerifier(password)
		if err != nil {
			return err
		}
		qs = setupSQL(d.User, verifier, d.DBName)
	}
	qs = append(qs, emptyAuthFileSQL)
	for _, q := range append(qs, hbaSQL(hbaFile)...) {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			// The statement holds the verifier: say which step, not it.
			return fmt.Errorf("set up database: %s: %w", strings.SplitN(q, " ", 3)[:2], err)
		}
	}
	return s.startPooler(ctx, d)
}

// superuser connects to PostgreSQL in machineID as the postgres
// superuser, whom the template trusts on the machine's loopback, through
// the guest agent (no psql started in the guest).
func (s *Service) superuser(ctx context.Context, machineID string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable")
	if err != nil {
		return nil, fmt.Errorf("superuser config: %w", err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.Fallbacks = "machine", Port, "postgres", "postgres", nil
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"machine"}, nil }
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		g, err := s.cfg.Engine.Guest(ctx, machineID)
		if err != nil {
			return nil, err
		}
		return g.DialPort(ctx, Port)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect as postgres: %w", err)
	}
	return conn, nil
}

// emptyAuthFileSQL leaves PgBouncer's auth_file empty: the pooler looks
// every client up in the database (pgbouncer.AuthQuery).
var emptyAuthFileSQL = "COPY (SELECT 1 WHERE false) TO " + quoteLiteral(pgbouncer.Users)

// legacyPoolerSQL writes the auth_file of a pooler started before the
// lookup (a fork of a database made then runs that pooler still): the
// role and its SCRAM verifier.
func legacyPoolerSQL(user, verifier string) string {
	line := fmt.Sprintf(`"%s" "%s"`, user, verifier)
	return fmt.Sprintf("COPY (SELECT %s) TO %s", quoteLiteral(line), quoteLiteral(pgbouncer.Users))
}

// startPooler starts PgBouncer in d's machine as the postgres user
// (daemonized: it keeps running in the machine, hibernation included),
// with its runtime configuration and a file limit for all its clients
// (pgbouncer.RuntimeIni).
func (s *Service) startPooler(ctx context.Context, d pandastack.Database) error {
	if _, err := s.runIn(ctx, d.MachineID, strings.NewReader(pgbouncer.RuntimeIni), "sh", "-c", poolerScript); err != nil {
		return fmt.Errorf("start pooler: %w", err)
	}
	return nil
}

// poolerScript writes the pooler's configuration from its standard input
// and starts it under pgbouncer.FileLimit: the hard limit raised as root,
// the soft one after runuser (whose PAM session sets it back to 1,024,
// which PgBouncer then ran under: 1,000 clients and 20 server
// connections just fit, its lookup connections did not).
var poolerScript = fmt.Sprintf(`set -e
cat > %[1]s; chown postgres:postgres %[1]s
ulimit -n %[2]d
exec runuser -u postgres -- sh -c 'ulimit -n %[2]d && exec pgbouncer -d -q %[1]s'`, pgbouncer.RuntimeConfig, pgbouncer.FileLimit)
