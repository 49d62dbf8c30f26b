package databases

// Backups: every database's WAL is archived continuously and a base
// backup is taken on a schedule and on demand, both into the server's
// object store under databases/<id>/ (wal/ and base/<backup>/). Nothing
// in the machine holds object-store credentials: the tenant is
// superuser-equivalent there. PostgreSQL's own tools run in the machine
// (its version is the server's: the host's Debian ships an older client
// that refuses a newer server), talking to it over its local socket as
// the postgres OS user, and the host carries their output out through
// the guest channel (archive.go). A restore (restore.go) makes a new
// database from a base backup and that WAL, up to a moment in time.

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/objstore"
)

// BackupStore keeps base backup records and where each WAL archive
// stands (internal/store/sqlite).
type BackupStore interface {
	PutDatabaseBackup(ctx context.Context, b pandastack.DatabaseBackup) error
	ListDatabaseBackups(ctx context.Context, databaseID string) ([]pandastack.DatabaseBackup, error)
	DeleteDatabaseBackup(ctx context.Context, id string) error
	PutDatabaseWAL(ctx context.Context, w pandastack.DatabaseWAL) error
	GetDatabaseWAL(ctx context.Context, databaseID string) (pandastack.DatabaseWAL, error)
	DeleteDatabaseWAL(ctx context.Context, databaseID string) error
}

// BackupConfig turns backups on (Config.Backup).
type BackupConfig struct {
	// Objects is where backups and WAL go; nil: no backups.
	Objects objstore.Store
	Store   BackupStore
	// Schedule is when base backups are due (internal/cron syntax; ""
	// is "@daily"): a database gets one when the schedule's next time
	// after its latest backup (or its creation) has passed. "off": none
	// but those asked for.
	Schedule string
	// Retention is how long backups and WAL are kept (0: 7 days); a
	// database's newest base backup is kept while the database exists.
	Retention time.Duration
	// Verify restores each new base backup in a throwaway machine
	// (verify.go) and marks it verified.
	Verify bool
	// ArchiveEvery is how often the host collects finished WAL segments
	// (0: 10 s). PostgreSQL finishes one at least every 30 s
	// (archive_timeout) when there was a write.
	ArchiveEvery time.Duration
}

// DefaultRetention is how long backups are kept when Retention is 0.
const DefaultRetention = 7 * 24 * time.Hour

// backups is the Service's backup state.
type backups struct {
	mu sync.Mutex
	// locks serialise each database's archive pulls and backups.
	locks map[string]*sync.Mutex
	// armed is the machine each database's archiving was last set up in,
	// and when.
	armed map[string]armed
	// running: databases with a base backup under way.
	running map[string]bool
}

type armed struct {
	machine string
	at      time.Time
}

func (s *Service) backupsOn() error {
	if s.cfg.Backup.Objects == nil || s.cfg.Backup.Store == nil {
		return pandastack.Errorf(pandastack.EUnavailable, "this server keeps no database backups")
	}
	return nil
}

func (s *Service) dbLock(id string) *sync.Mutex {
	b := &s.bk
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.locks == nil {
		b.locks = map[string]*sync.Mutex{}
	}
	mu := b.locks[id]
	if mu == nil {
		mu = &sync.Mutex{}
		b.locks[id] = mu
	}
	return mu
}

// Object keys of database id's backups.
func walPrefix(id string) string          { return "databases/" + id + "/wal/" }
func basePrefix(id, backup string) string { return "databases/" + id + "/base/" + backup + "/" }
func baseKey(id, backup string) string    { return basePrefix(id, backup) + "base.tar.gz" }
func walKey(id, name string) string       { return walPrefix(id) + name + ".gz" }
func walNameOfKey(id, key string) string {
	return strings.TrimSuffix(strings.TrimPrefix(key, walPrefix(id)), ".gz")
}

// Backup takes a base backup of running database ref now and answers
// once it is in object storage.
func (s *Service) Backup(ctx context.Context, teamID, ref string) (BackupInfo, error) {
	if err := s.backupsOn(); err != nil {
		return BackupInfo{}, err
	}
	d, err := s.ready(ctx, teamID, ref)
	if err != nil {
		return BackupInfo{}, err
	}
	if sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID); err != nil || sb.State != pandastack.StateRunning {
		return BackupInfo{}, pandastack.Errorf(pandastack.EConflict, "database %s is not running: connect to it (or wake it) first", ref)
	}
	b, err := s.backup(ctx, d)
	if err != nil {
		return BackupInfo{}, err
	}
	return backupInfo(b), nil
}

// backup takes a base backup of d: pg_basebackup in the machine writes a
// tar (with the WAL it needs, -X fetch: a backup restores without the
// archive) to its standard output, which the host compresses into the
// object store. The record says running, then done or failed; a failed
// backup's object is removed.
func (s *Service) backup(ctx context.Context, d pandastack.Database) (pandastack.DatabaseBackup, error) {
	bs := &s.bk
	bs.mu.Lock()
	if bs.running[d.ID] {
		bs.mu.Unlock()
		return pandastack.DatabaseBackup{}, pandastack.Errorf(pandastack.EConflict, "database %s: a base backup is already under way", d.ID)
	}
	if bs.running == nil {
		bs.running = map[string]bool{}
	}
	bs.running[d.ID] = true
	bs.mu.Unlock()
	defer func() {
		bs.mu.Lock()
		delete(bs.running, d.ID)
		bs.mu.Unlock()
	}()
	// The slot and the replication rule come with the archive.
	mu := s.dbLock(d.ID)
	mu.Lock()
	err := s.arm(ctx, d, true)
	mu.Unlock()
	if err != nil {
		s.diagnose(ctx, d, "set up WAL archiving for a base backup")
		return pandastack.DatabaseBackup{}, fmt.Errorf("back up database %s: %w", d.ID, err)
	}
	st := s.cfg.Backup.Store
	b := pandastack.DatabaseBackup{ID: pandastack.NewID("dbb-"), DatabaseID: d.ID, TeamID: d.TeamID, State: pandastack.BackupRunning,
		StartedAt: time.Now().UTC()}
	if err := st.PutDatabaseBackup(ctx, b); err != nil {
		return b, err
	}
	log := s.log.With("database", d.ID, "backup", b.ID)
	// A caller gone away must not leave the record running.
	ctx = context.WithoutCancel(ctx)
	fail := func(err error) (pandastack.DatabaseBackup, error) {
		_ = s.cfg.Backup.Objects.Delete(ctx, baseKey(d.ID, b.ID))
		b.State, b.FinishedAt, b.Error = pandastack.BackupFailed, time.Now().UTC(), shorten(err.Error(), 300)
		if perr := st.PutDatabaseBackup(ctx, b); perr != nil {
			log.Error("record failed backup", "err", perr)
		}
		log.Error("base backup failed", "err", err)
		s.diagnose(ctx, d, "base backup")
		return b, fmt.Errorf("back up database %s: %w", d.ID, err)
	}
	t0 := time.Now()
	stderr, err := s.streamOut(ctx, d.MachineID, 30*time.Minute, func(r io.Reader) error {
		pr, pw := io.Pipe()
		go func() {
			gz := gzip.NewWriter(pw)
			_, err := io.Copy(gz, r)
			if err == nil {
				err = gz.Close()
			}
			pw.CloseWithError(err)
		}()
		return s.cfg.Backup.Objects.Put(ctx, baseKey(d.ID, b.ID), pr)
	}, "runuser", "-u", "postgres", "--", pgBin+"/pg_basebackup", "-h", pgSocketDir, "-D", "-", "-F", "t", "-X", "fetch", "-c", "fast", "-v")
	if err != nil {
		return fail(err)
	}
	start, tli, end, err := basebackupPoints(stderr)
	if err != nil {
		return fail(err)
	}
	lsn, err := parseLSN(start)
	if err != nil {
		return fail(err)
	}
	info, err := s.cfg.Backup.Objects.Stat(ctx, baseKey(d.ID, b.ID))
	if err != nil {
		return fail(err)
	}
	b.State, b.FinishedAt, b.StartLSN, b.EndLSN, b.StartWAL, b.SizeBytes = pandastack.BackupDone, time.Now().UTC(), start, end, walFileName(tli, lsn), info.Size
	if err := st.PutDatabaseBackup(ctx, b); err != nil {
		return b, err
	}
	log.Info("base backup taken", "ms", time.Since(t0).Milliseconds(), "bytes", b.SizeBytes, "start_lsn", start, "end_lsn", end)
	if s.cfg.Backup.Verify {
		s.verifyLater(d, b)
	}
	return b, nil
}

// dueForBackup reports whether d's next scheduled base backup is due:
// the schedule's next time after its latest backup (or its creation) has
// passed. After a failed one it waits an hour before trying again.
func dueForBackup(spec cron.Spec, d pandastack.Database, list []pandastack.DatabaseBackup, now time.Time) bool {
	last, failed := d.CreatedAt, time.Time{}
	for _, b := range list {
		switch {
		case b.State == pandastack.BackupFailed:
			if b.StartedAt.After(failed) {
				failed = b.StartedAt
			}
		case b.StartedAt.After(last):
			last = b.StartedAt
		}
	}
	next := spec.Next(last)
	return !next.IsZero() && !next.After(now) && now.Sub(failed) >= time.Hour
}

// sortedNames sorts names in place and returns them.
func sortedNames(names []string) []string {
	sort.Strings(names)
	return names
}

// backupSoon takes a base backup of d in the background: after its
// archive's slot was made anew (archive.go) the restore window starts
// again only from a base backup past the gap. One already under way is
// as good.
func (s *Service) backupSoon(d pandastack.Database) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		if _, err := s.backup(ctx, d); err != nil && pandastack.ErrorCode(err) != pandastack.EConflict {
			s.log.Error("base backup after a gap in the WAL archive", "database", d.ID, "err", err)
		}
	}()
}
