package databases

import (
	"context"
	"time"

	"github.com/pandastack/pandastack"
)

// diagnoseScript prints what explains a failure inside a database's
// machine to the server's operator: the volume's space and inodes, what
// takes it, whether the WAL receiver runs, and the end of PostgreSQL's
// log. It reads only; its output goes to the server's log, never to the
// tenant.
const diagnoseScript = `df -k ` + DataMount + `; df -i ` + DataMount + ` | tail -1
du -sk ` + DataDir + `/base ` + DataDir + `/pg_wal ` + archiveDir + ` 2>/dev/null
ls ` + DataDir + `/pg_wal | head -20
grep -l pg_receivewal /proc/[0-9]*/comm 2>/dev/null | head -1 || echo 'no pg_receivewal'
tail -n 25 /var/log/postgresql/postgresql-17-main.log
tail -n 5 ` + DataMount + `/wal-archive.log 2>/dev/null
true`

// diagnose logs diagnoseScript's output for d after what failed.
func (s *Service) diagnose(ctx context.Context, d pandastack.Database, what string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, err := s.execIn(ctx, d.MachineID, 20*time.Second, nil, "sh", "-c", diagnoseScript)
	if err != nil {
		s.log.Warn("diagnose database machine", "database", d.ID, "after", what, "err", err)
		return
	}
	s.log.Warn("database machine after a failure", "database", d.ID, "after", what, "state", out)
}
