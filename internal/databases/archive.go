package databases

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// Continuous WAL archiving. In each running database's machine
// pg_receivewal (PostgreSQL's own, streaming over the local socket as the
// postgres OS user, through a replication slot so no WAL is recycled
// while it is behind; max_slot_wal_keep_size bounds what the slot holds
// on the volume) writes finished segments to archiveDir on the volume;
// archive_timeout makes PostgreSQL finish a segment at least every 30 s
// when anything was written. The host collects finished segments through
// the guest channel every ArchiveEvery, compresses them into the object
// store and removes them from the machine. A machine restarted from its
// volume (a new machine id) is set up again; a hibernated one is left
// alone and caught up on its wake.

const (
	// archiveDir is where pg_receivewal writes, on the volume (outside
	// PGDATA: base backups leave it out).
	archiveDir = DataMount + "/wal-archive"
	// archiveSlot is the replication slot pg_receivewal streams through.
	archiveSlot = "pandastack_archive"
	// rearmEvery: archiving is checked again (pg_receivewal still there,
	// its slot valid) this often even in the same machine: a receiver
	// down for longer than WAL takes to outgrow the slot's bound loses
	// the slot.
	rearmEvery = time.Minute
	// archiveCallLimit bounds one database's turn in the archive loop
	// (arm, then collecting its finished segments).
	archiveCallLimit = 2 * time.Minute
)

// archiveScript readies a machine for archiving and starts pg_receivewal
// when it is not running: a replication rule for the postgres OS user on
// the local socket, archive_timeout and the slot's bound (ALTER SYSTEM:
// on the volume, kept across restarts and copied by backups), the
// archive directory and the slot. A slot PostgreSQL invalidated (its
// receiver fell more than the bound behind: it died, or could not write
// while the volume was full) takes no receiver again: it is dropped, with
// the receiver looping on it and its partial segment, and made anew at
// the current position ("slot-lost at LSN"; the archive has a gap up to
// there). So is a slot past the bound that nothing streams from
// (unreserved, inactive): its receiver is stuck (seen after a full
// volume: the slot stayed unreserved and inactive for minutes with a
// receiver looping on it), and the next checkpoint would invalidate it
// anyway. A receiver running while its valid slot is inactive is
// restarted, its partial segment removed (the slot still holds that WAL):
// one that could not fill its preallocated segment on a full volume
// loops on the short file forever. Finished segments stay for the host
// to collect; until they are gone the new receiver's start (after the
// newest of them) fails and it tries again.
const archiveScript = `set -e
bin=` + pgBin + `; dir=` + archiveDir + `
q() { runuser -u postgres -- $bin/psql -X -q -At -v ON_ERROR_STOP=1 -h ` + pgSocketDir + ` -d postgres "$@"; }
receiving() { cat /proc/[0-9]*/comm 2>/dev/null | grep -qx pg_receivewal; }
hba=$(q -c 'SHOW hba_file')
if ! grep -qx 'local replication postgres peer' "$hba"; then
  echo 'local replication postgres peer' >> "$hba"
  q -c 'SELECT pg_reload_conf()' >/dev/null
fi
if [ "$(q -c 'SHOW archive_timeout')" != 30s ] || [ "$(q -c 'SHOW max_slot_wal_keep_size')" != KEEPMB ]; then
  q -c "ALTER SYSTEM SET archive_timeout = '30s'" -c "ALTER SYSTEM SET max_slot_wal_keep_size = 'KEEPMB'" -c 'SELECT pg_reload_conf()' >/dev/null
fi
mkdir -p "$dir"; chown postgres:postgres "$dir"; chmod 700 "$dir"
slot=$(q -c "SELECT wal_status || ' ' || active FROM pg_replication_slots WHERE slot_name = '` + archiveSlot + `'")
stopreceiver() {
  for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = pg_receivewal ] && kill ${p#/proc/} 2>/dev/null; done
  for i in $(seq 50); do receiving || break; sleep 0.1; done
  rm -f "$dir"/*.partial
}
case "$slot" in
"lost "*|"unreserved false")
  stopreceiver
  q -c "SELECT pg_drop_replication_slot('` + archiveSlot + `')" >/dev/null
  echo "slot-lost at $(q -c 'SELECT pg_current_wal_lsn()')" ;;
*" false")
  receiving && stopreceiver ;;
esac
if ! receiving; then
  runuser -u postgres -- $bin/pg_receivewal -h ` + pgSocketDir + ` -S ` + archiveSlot + ` --create-slot --if-not-exists
  setsid -f runuser -u postgres -- $bin/pg_receivewal -h ` + pgSocketDir + ` -D "$dir" -S ` + archiveSlot + ` -s 5 </dev/null >>` + DataMount + `/wal-archive.log 2>&1
  echo started
fi
`

// arm sets up archiving in d's current machine unless it was lately
// (force: whatever the last time).
func (s *Service) arm(ctx context.Context, d pandastack.Database, force bool) error {
	b := &s.bk
	b.mu.Lock()
	a := b.armed[d.ID]
	b.mu.Unlock()
	if !force && a.machine == d.MachineID && time.Since(a.at) < rearmEvery {
		return nil
	}
	// The slot may hold the WAL budget (walsize.go; at least 32 MiB, two
	// segments), which the WAL's room counts (walroom.go): a receiver
	// that cannot keep up (or died, the volume full) loses the archive's
	// continuity, not the database its disk.
	keep := walBudgetMB(0)
	if d.VolumeID != "" {
		if size, err := s.volumeSize(ctx, d); err == nil {
			keep = walBudgetMB(size)
		}
	}
	script := strings.ReplaceAll(archiveScript, "KEEPMB", fmt.Sprintf("%dMB", keep))
	out, err := s.run(ctx, d.MachineID, "sh", "-c", script)
	if err != nil {
		return fmt.Errorf("set up WAL archiving: %w", err)
	}
	if _, after, lost := strings.Cut(out, "slot-lost at "); lost {
		lsn, _, _ := strings.Cut(after, "\n")
		s.log.Warn("WAL archive slot was invalidated or stuck past the WAL budget (archiving fell behind by more than it); made anew: restores to moments before this need a base backup from before the gap, and one is taken now",
			"database", d.ID, "machine", d.MachineID, "resumed_at_lsn", lsn, "budget_mb", keep)
		s.backupSoon(d)
	}
	if strings.Contains(out, "started") {
		s.log.Info("WAL archiving started", "database", d.ID, "machine", d.MachineID)
	}
	b.mu.Lock()
	if b.armed == nil {
		b.armed = map[string]armed{}
	}
	b.armed[d.ID] = armed{machine: d.MachineID, at: time.Now()}
	b.mu.Unlock()
	return nil
}

// archive sets up d's archiving if needed and moves its finished WAL
// files into the object store. It answers the newest segment archived.
func (s *Service) archive(ctx context.Context, d pandastack.Database) (string, error) {
	mu := s.dbLock(d.ID)
	mu.Lock()
	defer mu.Unlock()
	if err := s.arm(ctx, d, false); err != nil {
		return "", err
	}
	st := s.cfg.Backup.Store
	w, err := st.GetDatabaseWAL(ctx, d.ID)
	if err != nil {
		return "", err
	}
	g, err := s.cfg.Engine.Guest(ctx, d.MachineID)
	if err != nil {
		return w.LastSegment, err
	}
	files, err := g.ListDir(ctx, archiveDir)
	if err != nil {
		return w.LastSegment, fmt.Errorf("list WAL archive: %w", err)
	}
	var names []string
	for _, f := range files {
		if !f.IsDir && isWALFile(f.Name) {
			names = append(names, f.Name)
		}
	}
	for _, name := range sortedNames(names) {
		if err := s.uploadWAL(ctx, g, d.ID, name); err != nil {
			return w.LastSegment, err
		}
		if walSegmentRE.MatchString(name) && name > w.LastSegment {
			w.LastSegment = name
		}
		w.ArchivedAt = time.Now().UTC()
		if err := st.PutDatabaseWAL(ctx, w); err != nil {
			return w.LastSegment, err
		}
		if err := g.Remove(ctx, path.Join(archiveDir, name), false); err != nil {
			return w.LastSegment, fmt.Errorf("remove archived %s: %w", name, err)
		}
	}
	return w.LastSegment, nil
}

// uploadWAL copies WAL file name from the machine into the object store,
// compressed (a segment finished early by archive_timeout is mostly
// zeros).
func (s *Service) uploadWAL(ctx context.Context, g pandastack.Guest, id, name string) error {
	pr, pw := io.Pipe()
	go func() {
		gz := gzip.NewWriter(pw)
		err := g.ReadFile(ctx, path.Join(archiveDir, name), gz, nil)
		if err == nil {
			err = gz.Close()
		}
		pw.CloseWithError(err)
	}()
	if err := s.cfg.Backup.Objects.Put(ctx, walKey(id, name), pr); err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("archive WAL %s: %w", name, err)
	}
	return nil
}

// archivable reports whether d's machine runs, and how often its archive
// may be collected: each collection counts as use of the machine, so a
// database that hibernates when idle is collected less often than its
// idle time, or it would never sleep.
func (s *Service) archivable(ctx context.Context, d pandastack.Database) (bool, time.Duration) {
	if d.State != pandastack.DatabaseReady {
		return false, 0
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID)
	if err != nil || sb.State != pandastack.StateRunning {
		return false, 0
	}
	if sb.AutoHibernateSeconds > 0 {
		return true, time.Duration(sb.AutoHibernateSeconds)*time.Second + 10*time.Second
	}
	return true, 0
}

// mark makes running database d write a commit and finish its WAL
// segment, and waits until that segment is archived: every moment before
// the returned time is then inside the restore window (a point in time
// recovery stops at the first commit after its target, so one must be
// archived). The returned time has a second's margin for the machine's
// clock.
func (s *Service) mark(ctx context.Context, d pandastack.Database) (time.Time, error) {
	at := time.Now().UTC().Add(-time.Second)
	out, err := s.run(ctx, d.MachineID, "runuser", "-u", "postgres", "--", pgBin+"/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
		"-h", pgSocketDir, "-d", "postgres", "-c", "SELECT txid_current()", "-c", "SELECT pg_walfile_name(pg_switch_wal() - 1)")
	if err != nil {
		return time.Time{}, fmt.Errorf("mark the WAL: %w", err)
	}
	lines := strings.Fields(out)
	if len(lines) != 2 || !walSegmentRE.MatchString(lines[1]) {
		return time.Time{}, fmt.Errorf("mark the WAL: unexpected answer %q", shorten(out, 100))
	}
	want := lines[1]
	deadline := time.Now().Add(2 * time.Minute)
	for {
		last, err := s.archive(ctx, d)
		if err == nil && last >= want {
			break
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("WAL segment %s was not archived in time (last %s): %v", want, last, err)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	w, err := s.cfg.Backup.Store.GetDatabaseWAL(ctx, d.ID)
	if err != nil {
		return time.Time{}, err
	}
	if at.After(w.MarkedAt) {
		w.MarkedAt = at
		if err := s.cfg.Backup.Store.PutDatabaseWAL(ctx, w); err != nil {
			return time.Time{}, err
		}
	}
	return at, nil
}
