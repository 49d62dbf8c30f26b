package databases

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/pandastack/pandastack"
)

// hbaConf replaces the template's trust-everything pg_hba.conf in a
// database's machine: over TCP (which is how the router reaches it) every
// role logs in with its password; the postgres superuser only over the
// local socket, as the postgres OS user.
const hbaConf = `# PandaStack managed database (internal/databases): passwords over TCP.
local   all   postgres                  peer
host    all   all        127.0.0.1/32   scram-sha-256
host    all   all        ::1/128        scram-sha-256
`

// setupScript runs as root in the machine: it writes hbaConf, then runs
// the SQL on its standard input as the postgres superuser, which reloads
// the configuration last.
const setupScript = `set -e
cat > /etc/postgresql/17/main/pg_hba.conf <<'PANDASTACK_HBA'
` + hbaConf + `PANDASTACK_HBA
exec runuser -u postgres -- psql -X -q -v ON_ERROR_STOP=1 -d postgres`

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes a PostgreSQL string literal.
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

// setupSQL makes the tenant's role (from its SCRAM verifier) and its
// database, and reloads pg_hba.conf.
func setupSQL(user, verifier, db string) string {
	return fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD %s;
CREATE DATABASE %s OWNER %s;
SELECT pg_reload_conf();
`, quoteIdent(user), quoteLiteral(verifier), quoteIdent(db), quoteIdent(user))
}

// setup configures a fresh machine for database d with password.
func (s *Service) setup(ctx context.Context, d pandastack.Database, password string) error {
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	verifier, err := scramVerifier(password, salt)
	if err != nil {
		return err
	}
	g, err := s.cfg.Engine.Guest(ctx, d.MachineID)
	if err != nil {
		return fmt.Errorf("reach database machine: %w", err)
	}
	var out bytes.Buffer
	res, err := g.Exec(ctx, pandastack.ExecRequest{Args: []string{"sh", "-c", setupScript}, User: "root", Cwd: "/",
		TimeoutSeconds: 60}, strings.NewReader(setupSQL(d.User, verifier, d.DBName)),
		func(ev pandastack.ExecEvent) error {
			if (ev.Type == "stdout" || ev.Type == "stderr") && out.Len() < 4096 {
				out.Write(ev.Data)
			}
			return nil
		})
	if err != nil {
		return fmt.Errorf("set up database: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		return fmt.Errorf("set up database: exit %d: %s", res.ExitCode, strings.TrimSpace(out.String()))
	}
	return nil
}
