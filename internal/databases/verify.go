package databases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// A base backup is verified by restoring it in a throwaway machine from
// the postgres template (no volume: its root disk holds the copy): the
// host streams the stored tar in, PostgreSQL starts on it, replays the
// WAL the backup carries to its consistent end, and answers a query that
// reads every database's catalog. The backup is then marked verified;
// the machine is removed whatever happens.

// verifyScript restores the tar on its standard input and checks it.
const verifyScript = `set -e
bin=` + pgBin + `; dir=/var/lib/postgresql/verify; conf=/etc/postgresql/17/main/postgresql.conf; log=/var/log/postgresql/verify.log
runuser -u postgres -- $bin/pg_ctl stop -D /var/lib/postgresql/17/main -m fast -w -s >/dev/null 2>&1 || true
rm -rf "$dir"; mkdir -p "$dir"
tar -xzf - -C "$dir"
chown -R postgres:postgres "$dir"; chmod 700 "$dir"
sed -i "s|^data_directory *=.*|data_directory = '$dir'|" "$conf"
runuser -u postgres -- $bin/pg_ctl start -D "$dir" -w -t 600 -s -l "$log" -o "-c config_file=$conf" || { tail -n 15 "$log"; exit 1; }
runuser -u postgres -- $bin/psql -X -q -At -v ON_ERROR_STOP=1 -h ` + pgSocketDir + ` -d postgres -c 'SELECT count(*) FROM pg_database WHERE datallowconn'
`

// verifyTTL bounds a verification machine's life should the server stop
// before it removes it.
const verifyTTL = 30 * 60

// verify restores base backup b of database d in a throwaway machine and
// records the result on b.
func (s *Service) verify(ctx context.Context, d pandastack.Database, b pandastack.DatabaseBackup) error {
	ttl := int64(verifyTTL)
	sb, err := s.cfg.Sandboxes.Create(ctx, d.TeamID, sandboxes.CreateParams{Template: Template, TTLSeconds: &ttl,
		Metadata: map[string]string{"pandastack.database": d.ID, "pandastack.backup": b.ID}, ManagedBy: managedBy(d.ID)})
	if err != nil {
		return fmt.Errorf("verify backup %s: start a machine: %w", b.ID, err)
	}
	defer func() {
		if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), sb.ID, pandastack.StateKilled); err != nil {
			s.log.Error("remove backup verification machine", "database", d.ID, "backup", b.ID, "machine", sb.ID, "err", err)
		}
	}()
	obj, err := s.cfg.Backup.Objects.Get(ctx, baseKey(d.ID, b.ID))
	if err != nil {
		return fmt.Errorf("verify backup %s: %w", b.ID, err)
	}
	defer obj.Close()
	out, err := s.execIn(ctx, sb.ID, 15*time.Minute, obj, "sh", "-c", verifyScript)
	if err != nil {
		return fmt.Errorf("verify backup %s: %w", b.ID, err)
	}
	if n := strings.TrimSpace(out); n == "" || n == "0" {
		return fmt.Errorf("verify backup %s: the restored cluster lists no database (%q)", b.ID, n)
	}
	return nil
}

// verifyLater verifies b in the background and records the outcome.
func (s *Service) verifyLater(d pandastack.Database, b pandastack.DatabaseBackup) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		t0 := time.Now()
		err := s.verify(ctx, d, b)
		if err != nil {
			s.log.Error("base backup did not verify", "database", d.ID, "backup", b.ID, "err", err)
			b.Error = shorten("verification: "+err.Error(), 300)
		} else {
			b.Verified = true
			s.log.Info("base backup verified", "database", d.ID, "backup", b.ID, "ms", time.Since(t0).Milliseconds())
		}
		if err := s.cfg.Backup.Store.PutDatabaseBackup(ctx, b); err != nil {
			s.log.Error("record backup verification", "database", d.ID, "backup", b.ID, "err", err)
		}
	}()
}
