package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// backupsBench is the backups part of `pandastack bench --databases`, on
// the run's small database: on-demand base backups, each until the API
// answered it done, and restores to a point in time as new databases,
// each until the restored database answered (create's rule).
type backupsBench struct {
	BackupRuns int     `json:"db_backup_runs,omitempty"`
	BackupP50  float64 `json:"db_backup_p50_ms,omitempty"`
	BackupMax  float64 `json:"db_backup_max_ms,omitempty"`
	RestoreP50 float64 `json:"db_restore_pitr_p50_ms,omitempty"`
	RestoreMax float64 `json:"db_restore_pitr_max_ms,omitempty"`
}

// benchBackups takes n base backups of d, then restores d n times to the
// earliest moment its backups reach (each restore deleted after). A server
// that keeps no backups is not measured.
func benchBackups(ctx context.Context, c *sdk.Client, d *sdk.Database, n int, tag string, progress func(string, ...any)) (backupsBench, error) {
	var res backupsBench
	progress("%d base backups on demand, then %d restores to a point in time", n, n)
	var backups, restores []float64
	for range n {
		t0 := time.Now()
		b, err := c.BackupDatabase(ctx, d.ID)
		var ae *sdk.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
			progress("the server keeps no database backups: not measured (%s)", ae.Message)
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("base backup: %w", err)
		}
		if b.State != "done" {
			return res, fmt.Errorf("base backup %s: %s %s", b.ID, b.State, b.Error)
		}
		backups = append(backups, ms(time.Since(t0)))
	}
	target, err := restorableMoment(ctx, c, d.ID)
	if err != nil {
		return res, err
	}
	for i := range n {
		t0 := time.Now()
		r, err := c.RestoreDatabase(ctx, d.ID, fmt.Sprintf("bench-%s-restore-%d", tag, i), target)
		if err != nil {
			return res, fmt.Errorf("restore to %s: %w", target.Format(time.RFC3339Nano), err)
		}
		restores = append(restores, ms(time.Since(t0)))
		if err := c.DeleteDatabase(ctx, r.ID); err != nil {
			return res, err
		}
	}
	res.BackupRuns = n
	res.BackupP50, res.BackupMax = pct(backups, 50), pct(backups, 100)
	res.RestoreP50, res.RestoreMax = pct(restores, 50), pct(restores, 100)
	return res, nil
}

// restorableMoment is a second past the earliest moment database id's
// backups restore to (the end of the first backup), once it is two seconds
// past: the server archives the running database's WAL up to then for the
// restore, which then replays some WAL, as a restore usually does.
func restorableMoment(ctx context.Context, c *sdk.Client, id string) (time.Time, error) {
	l, err := c.ListDatabaseBackups(ctx, id)
	if err != nil {
		return time.Time{}, err
	}
	if l.EarliestRestoreTime == nil {
		return time.Time{}, fmt.Errorf("database %s: no restorable moment after %d base backups", id, len(l.Backups))
	}
	target := l.EarliestRestoreTime.Add(time.Second)
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(time.Until(target.Add(2 * time.Second))):
	}
	return target, nil
}
