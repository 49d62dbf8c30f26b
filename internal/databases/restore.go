package databases

import (
	"compress/gzip"
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// RestoreParams asks for a database restored to a moment of another.
type RestoreParams struct {
	// Name is the new database's.
	Name string
	// TargetTime is the moment: the new database holds every transaction
	// the source committed up to it, and none after.
	TargetTime time.Time
	// SizeMiB is the new database's volume; 0 keeps the source's. It is
	// never smaller than the source's: a database whose volume filled is
	// restored into a bigger one.
	SizeMiB int
}

// restoreWALDir is where a restore puts the archived WAL recovery reads
// (restore_command copies from it: the machine has no object-store
// credentials).
const restoreWALDir = DataMount + "/restore-wal"

// Restore makes database p.Name for teamID from database ref's backups
// as it was at p.TargetTime: the latest base backup finished before then,
// and the archived WAL after it replayed up to that moment. The new
// database keeps the source's role and database names but gets its own
// password and its own archive; it answers like Create. A moment outside
// the window — in the future, before the first finished base backup,
// after the last archived one, or in a gap in the archive (walgaps.go) —
// is EInvalid with the window's bound.
// Whatever fails on the way is removed.
func (s *Service) Restore(ctx context.Context, teamID, ref string, p RestoreParams) (Info, error) {
	if err := checkName(p.Name); err != nil {
		return Info{}, err
	}
	if err := s.backupsOn(); err != nil {
		return Info{}, err
	}
	if addr, _ := s.router(); addr == "" {
		return Info{}, pandastack.Errorf(pandastack.EUnavailable, "databases are off on this server: start it with --db-listen")
	}
	src, err := s.ready(ctx, teamID, ref)
	if err != nil {
		return Info{}, err
	}
	base, err := s.restorePlan(ctx, src, p.TargetTime)
	if err != nil {
		return Info{}, err
	}
	size, err := s.volumeSize(ctx, src)
	if err != nil {
		return Info{}, err
	}
	if size, err = restoreSize(size, p.SizeMiB); err != nil {
		return Info{}, err
	}
	d, password, err := s.newRecord(ctx, teamID, p.Name, src.User, src.DBName)
	if err != nil {
		return Info{}, err
	}
	ok := false
	defer func() {
		if !ok {
			s.discard(ctx, d)
		}
	}()
	t0 := time.Now()
	if err := s.makeVolume(ctx, &d, size); err != nil {
		return Info{}, fmt.Errorf("restore database %s: %w", ref, err)
	}
	sb, err := s.machineFor(ctx, d, nil)
	if err != nil {
		return Info{}, fmt.Errorf("restore database %s: %w", ref, err)
	}
	d.MachineID = sb.ID
	if err := s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID); err != nil {
		return Info{}, err
	}
	nwal, err := s.recover(ctx, d, size, src.ID, base, p.TargetTime)
	if err != nil {
		return Info{}, fmt.Errorf("restore database %s: %w", ref, err)
	}
	tRecover := time.Since(t0)
	// The copy has the source's role and verifier: set up the pooler and
	// the rules as for any machine, then give it its own password.
	if err := s.setup(ctx, d, password); err != nil {
		return Info{}, fmt.Errorf("restore database %s: %w", ref, err)
	}
	srcPassword, err := s.password(src)
	if err != nil {
		return Info{}, err
	}
	if err := s.goLiveCopy(ctx, &d, srcPassword, password, false); err != nil {
		return Info{}, fmt.Errorf("restore database %s: %w", ref, err)
	}
	ok = true
	s.log.Info("database restored", "database", d.ID, "source", src.ID, "team", teamID, "backup", base.ID,
		"target", p.TargetTime.UTC().Format(time.RFC3339Nano), "wal_files", nwal, "recover_ms", tRecover.Milliseconds(),
		"total_ms", time.Since(t0).Milliseconds())
	in := s.info(d, StateRunning, password)
	in.AutoHibernateSeconds = sb.AutoHibernateSeconds
	return in, nil
}

// restoreSize is the volume of a restore asking for sizeMiB (0: the
// source's) from a source of srcMiB: never smaller than the source's,
// which the restored data may fill.
func restoreSize(srcMiB, sizeMiB int) (int, error) {
	if sizeMiB == 0 {
		return srcMiB, nil
	}
	size, err := checkSize(sizeMiB)
	if err != nil {
		return 0, err
	}
	if size < srcMiB {
		return 0, pandastack.Errorf(pandastack.EInvalid, "size_mib %d is smaller than the source's volume (%d MiB), which the restored data may fill", size, srcMiB)
	}
	return size, nil
}

// restorePlan checks target against src's restore window and picks the
// base backup to start from. When target is after the last moment known
// archived and src runs, it marks src's WAL first (archive.go).
func (s *Service) restorePlan(ctx context.Context, src pandastack.Database, target time.Time) (pandastack.DatabaseBackup, error) {
	var none pandastack.DatabaseBackup
	if target.IsZero() {
		return none, pandastack.Errorf(pandastack.EInvalid, "target_time is required (RFC 3339)")
	}
	target = target.UTC()
	if target.After(time.Now()) {
		return none, pandastack.Errorf(pandastack.EInvalid, "target_time %s is in the future", target.Format(time.RFC3339))
	}
	list, err := s.cfg.Backup.Store.ListDatabaseBackups(ctx, src.ID)
	if err != nil {
		return none, err
	}
	var base, first pandastack.DatabaseBackup
	for _, b := range list {
		if b.State != pandastack.BackupDone {
			continue
		}
		if first.ID == "" {
			first = b
		}
		// Its end is inside the window: FinishedAt is taken after the
		// backup's end record, so recovery is consistent before target.
		if !b.FinishedAt.After(target) {
			base = b
		}
	}
	switch {
	case first.ID == "":
		return none, pandastack.Errorf(pandastack.EInvalid, "database %s has no finished base backup yet: take one (POST /v1/databases/%s/backups), then restore to a later time", src.ID, src.ID)
	case base.ID == "":
		return none, pandastack.Errorf(pandastack.EInvalid, "target_time %s is before the earliest restorable time %s (the end of the first base backup)",
			target.Format(time.RFC3339Nano), first.FinishedAt.Format(time.RFC3339Nano))
	}
	objs, err := s.cfg.Backup.Objects.List(ctx, walPrefix(src.ID))
	if err != nil {
		return none, fmt.Errorf("list archived WAL: %w", err)
	}
	if g, ok := gapAfter(walGaps(src.ID, objs, list), base); ok && target.After(g.From) {
		return none, gapErr(src.ID, target, g)
	}
	w, err := s.cfg.Backup.Store.GetDatabaseWAL(ctx, src.ID)
	if err != nil {
		return none, err
	}
	if !target.Before(w.MarkedAt) {
		if ok, _ := s.archivable(ctx, src); !ok {
			return none, pandastack.Errorf(pandastack.EInvalid, "target_time %s is after the latest archived moment %s; wake database %s to restore to a later time",
				target.Format(time.RFC3339Nano), w.MarkedAt.Format(time.RFC3339Nano), src.ID)
		}
		marked, err := s.mark(ctx, src)
		if err != nil {
			return none, fmt.Errorf("restore database %s: %w", src.ID, err)
		}
		if !target.Before(marked) {
			return none, pandastack.Errorf(pandastack.EInvalid, "target_time %s is after the latest archived moment %s",
				target.Format(time.RFC3339Nano), marked.Format(time.RFC3339Nano))
		}
	}
	return base, nil
}

// recoverPrepare stops the template's cluster and readies the volume.
const recoverPrepare = `set -e
vol=` + DataMount + `
` + projectVolume + `runuser -u postgres -- ` + pgBin + `/pg_ctl stop -D /var/lib/postgresql/17/main -m fast -w -s >/dev/null 2>&1 || true
rm -rf "$vol/17" "$vol/.init" "` + restoreWALDir + `"
mkdir -p "$vol/.init/main" "` + restoreWALDir + `"
[ "$proj" = 0 ] || chattr +P -p ` + projWAL + ` "` + restoreWALDir + `"
`

// recoverScript puts the extracted backup in place as PGDATA with
// recovery settings, starts PostgreSQL (listening where pgListen says)
// and waits for it to reach the target and promote; then it drops the
// settings and the copied WAL and bounds the WAL for its own volume ($2
// and $3, walBoundsSQL: a restore may be bigger than its source). On
// failure, a server that stopped during recovery included, it prints the
// server log's end.
const recoverScript = `set -e
vol=` + DataMount + `; data=` + DataDir + `; conf=/etc/postgresql/17/main/postgresql.conf; log=/var/log/postgresql/postgresql-17-main.log; room="$1"
` + walRoomFunc + projectVolume + `q() { runuser -u postgres -- ` + pgBin + `/psql -X -q -At -v ON_ERROR_STOP=1 -h ` + pgSocketDir + ` -d postgres "$@"; }
fail() { echo "$1"; tail -n 15 "$log"; exit 1; }
chown -R postgres:postgres "$vol/.init" "` + restoreWALDir + `"
chmod 700 "$vol/.init/main"
touch "$vol/.init/main/recovery.signal"
printf "%s\n" "restore_command = 'cp ` + restoreWALDir + `/%f %p'" "recovery_target_time = '$TARGET'" \
  "recovery_target_action = 'promote'" >> "$vol/.init/main/postgresql.auto.conf"
sync
mv "$vol/.init" "$vol/17"
chmod 755 "$vol"
sed -i "s|^data_directory *=.*|data_directory = '$data'|" "$conf"
walroom "$data/pg_wal" "` + restoreWALDir + `"
: > "$log"
runuser -u postgres -- ` + pgBin + `/pg_ctl start -D "$data" -w -t 600 -s -l "$log" -o "-c config_file=$conf ` + pgListen + `" || fail "postgres did not start"
pid=$(head -n 1 "$data/postmaster.pid")
i=0
until [ "$(q -c 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; do
  kill -0 "$pid" 2>/dev/null || fail "postgres stopped during recovery"
  i=$((i+1)); [ $i -lt 3000 ] || fail "recovery did not reach the target"
  sleep 0.2
done
q -c 'ALTER SYSTEM RESET restore_command' -c 'ALTER SYSTEM RESET recovery_target_time' -c 'ALTER SYSTEM RESET recovery_target_action' \
  -c "$2" -c "$3" -c 'SELECT pg_reload_conf()' >/dev/null
rm -rf "` + restoreWALDir + `"
grep -E 'recovery stopping|selected new timeline' "$log" | tail -n 2 || true
`

// recoveryShort is PostgreSQL's FATAL when the WAL ends before the
// recovery target: a moment past a gap's start that its upload time did
// not rule out (walgaps.go).
const recoveryShort = "recovery ended before configured recovery target was reached"

// recover writes base backup b of database srcID and srcID's archived WAL
// after it onto d's fresh volume of sizeMiB, and recovers the cluster there up to
// target. It answers how many WAL files it copied.
func (s *Service) recover(ctx context.Context, d pandastack.Database, sizeMiB int, srcID string, b pandastack.DatabaseBackup, target time.Time) (int, error) {
	if _, err := s.run(ctx, d.MachineID, "sh", "-c", recoverPrepare); err != nil {
		return 0, fmt.Errorf("prepare the volume: %w", err)
	}
	obj, err := s.cfg.Backup.Objects.Get(ctx, baseKey(srcID, b.ID))
	if err != nil {
		return 0, fmt.Errorf("open base backup %s: %w", b.ID, err)
	}
	_, err = s.execIn(ctx, d.MachineID, 10*time.Minute, obj, "tar", "-xzf", "-", "-C", DataMount+"/.init/main")
	obj.Close()
	if err != nil {
		return 0, fmt.Errorf("extract base backup %s: %w", b.ID, err)
	}
	objs, err := s.cfg.Backup.Objects.List(ctx, walPrefix(srcID))
	if err != nil {
		return 0, fmt.Errorf("list archived WAL: %w", err)
	}
	g, err := s.cfg.Engine.Guest(ctx, d.MachineID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		name := walNameOfKey(srcID, o.Key)
		if !isWALFile(name) || (walSegmentRE.MatchString(name) && name < b.StartWAL) {
			continue
		}
		if err := s.placeWAL(ctx, g, o.Key, path.Join(restoreWALDir, name)); err != nil {
			return n, err
		}
		n++
	}
	script := strings.Replace(recoverScript, "$TARGET", target.UTC().Format("2006-01-02 15:04:05.999999")+"+00", 1)
	out, err := s.execIn(ctx, d.MachineID, 15*time.Minute, nil, append([]string{"sh", "-c", script, "recover", walRoomArg(sizeMiB)}, walBoundsSQL(sizeMiB)...)...)
	if err != nil && strings.Contains(err.Error(), recoveryShort) {
		return n, pandastack.Errorf(pandastack.EInvalid, "target_time %s is past the end of database %s's archived WAL from base backup %s (the archive has a gap after it): restore to an earlier moment",
			target.UTC().Format(time.RFC3339Nano), srcID, b.ID)
	}
	if err != nil {
		return n, fmt.Errorf("recover to %s: %w", target.UTC().Format(time.RFC3339Nano), err)
	}
	s.log.Info("database recovered", "database", d.ID, "source", srcID, "log", strings.TrimSpace(out))
	return n, nil
}

// placeWAL writes archived WAL object key, uncompressed, to file in g.
func (s *Service) placeWAL(ctx context.Context, g pandastack.Guest, key, file string) error {
	obj, err := s.cfg.Backup.Objects.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("open archived WAL %s: %w", key, err)
	}
	defer obj.Close()
	zr, err := gzip.NewReader(obj)
	if err != nil {
		return fmt.Errorf("read archived WAL %s: %w", key, err)
	}
	if _, err := g.WriteFile(ctx, file, 0o600, zr); err != nil {
		return fmt.Errorf("copy archived WAL %s: %w", key, err)
	}
	return nil
}
