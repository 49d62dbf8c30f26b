package databases

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/quotas"
)

// A database's data directory lives on a durable volume of its own,
// mounted at DataMount in its machine: the machine's root disk holds only
// the template's programs and configuration. A create restores a base
// whose volume holds a running cluster (base.go), or, with none, copies
// the template's baked (stopped) cluster onto the empty volume; a machine
// restarted on the volume after its VM died finds the cluster there and
// PostgreSQL recovers it from its WAL.
const (
	// DataMount is where the volume is mounted in the machine.
	DataMount = "/pgdata"
	// DataDir is PGDATA, on the volume.
	DataDir = DataMount + "/17/main"
	// DefaultSizeMiB is a database's volume when the create names none.
	DefaultSizeMiB = 1024
	// MinSizeMiB holds the template's cluster with room to write.
	MinSizeMiB = 128
)

// checkSize validates a create's size (0: the default).
func checkSize(sizeMiB int) (int, error) {
	if sizeMiB == 0 {
		return DefaultSizeMiB, nil
	}
	if sizeMiB < MinSizeMiB || sizeMiB > pandastack.MaxVolumeMiB {
		return 0, pandastack.Errorf(pandastack.EInvalid, "size_mib must be between %d and %d, got %d", MinSizeMiB, pandastack.MaxVolumeMiB, sizeMiB)
	}
	return sizeMiB, nil
}

// makeVolume makes d's volume of sizeMiB, counted against the team's
// disk quota, and records it on d.
func (s *Service) makeVolume(ctx context.Context, d *pandastack.Database, sizeMiB int) error {
	if s.cfg.Quotas != nil {
		release, err := s.cfg.Quotas.Reserve(ctx, d.TeamID, quotas.Usage{Volumes: 1, DiskMiB: sizeMiB})
		if err != nil {
			return err
		}
		defer release()
	}
	var v pandastack.Volume
	var err error
	if s.cfg.Volumes != nil {
		v, err = s.cfg.Volumes.CreateManagedVolume(ctx, d.TeamID, d.ID, sizeMiB, managedBy(d.ID))
	} else {
		v, err = s.cfg.Engine.CreateVolume(ctx, d.TeamID, d.ID, sizeMiB)
	}
	if err != nil {
		return fmt.Errorf("create volume of database %s: %w", d.ID, err)
	}
	d.VolumeID = v.ID
	if err := s.cfg.Store.SetDatabaseVolume(ctx, d.ID, v.ID); err != nil {
		if derr := s.cfg.Engine.DeleteVolume(context.WithoutCancel(ctx), v.ID); derr != nil {
			s.log.Error("delete unrecorded database volume", "database", d.ID, "volume", v.ID, "err", derr)
		}
		d.VolumeID = ""
		return err
	}
	return nil
}

// pgListen is the postgres option a database's cluster starts with: it
// listens on the loopback and on the machine's NIC address, where the
// router connects (a machine without a NIC listens on the loopback only:
// PostgreSQL goes on when one of its addresses cannot be bound).
const pgListen = "-c listen_addresses=localhost," + network.GuestAddr

// dataScript points the machine's cluster at DataDir and starts it there:
// it stops the template's cluster (on the root disk), copies it onto the
// volume when the volume has none yet (into a side directory renamed into
// place once synced: a half copy never looks like a cluster), and starts
// PostgreSQL on the volume, which replays its WAL if the last machine
// died, listening where pgListen says. pg_ctl directly, not Debian's
// pg_ctlcluster: a Perl start-up costs seconds under TCG. Before the
// start it keeps the WAL's room ($1 KiB, walroom.go). It prints how long
// each step took.
const dataScript = `set -e
vol=` + DataMount + `; data=` + DataDir + `; root=/var/lib/postgresql/17/main; conf=/etc/postgresql/17/main/postgresql.conf; room="$1"
` + walRoomFunc + projectVolume + `pgctl() { runuser -u postgres -- /usr/lib/postgresql/17/bin/pg_ctl "$@"; }
now() { date +%s%N; }
t0=$(now)
pgctl stop -D "$root" -m fast -w -s >/dev/null 2>&1 || true
t1=$(now); copied=0
if [ ! -s "$data/PG_VERSION" ]; then
  rm -rf "$vol/17" "$vol/.init"
  mkdir -p "$vol/.init"
  cp -a "$root" "$vol/.init/main"
  sync
  mv "$vol/.init" "$vol/17"
  copied=1
fi
chmod 755 "$vol"
sed -i "s|^data_directory *=.*|data_directory = '$data'|" "$conf"
grep -q "^data_directory = '$data'" "$conf"
walroom "$data/pg_wal"
t2=$(now)
pgctl start -D "$data" -w -t 300 -s -l /var/log/postgresql/postgresql-17-main.log -o "-c config_file=$conf ` + pgListen + `"
t3=$(now)
echo "stop_ms=$(( (t1-t0)/1000000 )) copy_ms=$(( (t2-t1)/1000000 )) copied=$copied start_ms=$(( (t3-t2)/1000000 ))"
`

// startOnVolume runs dataScript in d's machine, whose volume is sizeMiB.
func (s *Service) startOnVolume(ctx context.Context, d pandastack.Database, sizeMiB int) error {
	t0 := time.Now()
	out, err := s.run(ctx, d.MachineID, "sh", "-c", dataScript, "data", walRoomArg(sizeMiB))
	if err != nil {
		return fmt.Errorf("start postgres on the volume: %w", err)
	}
	s.log.Info("postgres on its volume", "database", d.ID, "machine", d.MachineID, "ms", time.Since(t0).Milliseconds(), "steps", strings.TrimSpace(out))
	return nil
}

// run runs args as root in machine id and returns its output; a failure
// carries the output's end.
func (s *Service) run(ctx context.Context, machineID string, args ...string) (string, error) {
	return s.runIn(ctx, machineID, nil, args...)
}

// runIn is run with stdin as the command's standard input.
func (s *Service) runIn(ctx context.Context, machineID string, stdin io.Reader, args ...string) (string, error) {
	return s.execIn(ctx, machineID, 120*time.Second, stdin, args...)
}

// dropVolume deletes d's volume, if it has one (its machine is gone).
func (s *Service) dropVolume(ctx context.Context, d pandastack.Database) {
	if d.VolumeID == "" {
		return
	}
	if err := s.cfg.Engine.DeleteVolume(ctx, d.VolumeID); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		s.log.Error("delete database volume", "database", d.ID, "volume", d.VolumeID, "err", err)
	}
}
