package databases

import (
	"sort"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore"
)

// A database's WAL archive can have a gap: its receiver stopped while the
// volume was full, PostgreSQL invalidated the slot, and the segments
// written meanwhile never reached object storage (archive.go makes the
// slot anew and takes a base backup at once). Recovery cannot cross a
// gap, so from the base backup before it a restore reaches only the
// moments before it; the window opens again at the end of the first base
// backup taken after it.

// RestoreGap is a stretch of time no restore reaches, as the backup list
// shows it.
type RestoreGap struct {
	// From: nothing written after this moment and before Until is in
	// the archive (the upload of the last segment before the gap).
	From time.Time `json:"from"`
	// Until is the end of the first base backup after the gap, where the
	// window opens again; absent while none has finished.
	Until *time.Time `json:"until,omitempty"`
}

// walGap is a break in the archived WAL: segment After is archived, the
// next ones up to Resume are not.
type walGap struct {
	After, Resume string
	// From is After's upload. It is never earlier than anything written
	// in After, so a moment after it is past the archive's end for any
	// restore starting before the gap; one before it may still be (its
	// recovery then stops short, and recover says so).
	From time.Time
	// Until is the end of the first finished base backup that starts at
	// or after Resume (zero while none).
	Until  time.Time
	Backup string // that backup
}

// walGaps finds the gaps in one database's archived WAL inside its
// restore window (after the start of a finished base backup), objs as
// Objects.List gives them (keys under walPrefix(id)), and where each
// closes among backups. Segments of different timelines are not compared.
func walGaps(id string, objs []objstore.Info, backups []pandastack.DatabaseBackup) []walGap {
	type seg struct {
		name string
		n    uint64 // the segment's number on its timeline
		mod  time.Time
	}
	var segs []seg
	for _, o := range objs {
		name := walNameOfKey(id, o.Key)
		if n, ok := walSegmentNumber(name); ok {
			segs = append(segs, seg{name, n, o.ModTime})
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].name < segs[j].name })
	done := make([]pandastack.DatabaseBackup, 0, len(backups))
	for _, b := range backups {
		if b.State == pandastack.BackupDone && b.StartWAL != "" {
			done = append(done, b)
		}
	}
	sort.Slice(done, func(i, j int) bool { return done[i].FinishedAt.Before(done[j].FinishedAt) })
	var gaps []walGap
	for i := 1; i < len(segs); i++ {
		p, c := segs[i-1], segs[i]
		if p.name[:8] != c.name[:8] || c.n <= p.n+1 {
			continue
		}
		if !startsBefore(done, p.name) {
			continue // before the window: no restore starts there
		}
		g := walGap{After: p.name, Resume: c.name, From: p.mod}
		for _, b := range done {
			if b.StartWAL[:8] == c.name[:8] && b.StartWAL >= c.name {
				g.Until, g.Backup = b.FinishedAt, b.ID
				break
			}
		}
		gaps = append(gaps, g)
	}
	return gaps
}

// startsBefore reports whether a backup of done starts at segment seg or
// before it, on its timeline: whether a restore can reach seg's WAL.
func startsBefore(done []pandastack.DatabaseBackup, seg string) bool {
	for _, b := range done {
		if b.StartWAL[:8] == seg[:8] && b.StartWAL <= seg {
			return true
		}
	}
	return false
}

// gapAfter is the first gap in the archive after base backup b's start:
// where a restore from b can no longer reach (ok false: none).
func gapAfter(gaps []walGap, b pandastack.DatabaseBackup) (walGap, bool) {
	if !walSegmentRE.MatchString(b.StartWAL) {
		return walGap{}, false
	}
	for _, g := range gaps {
		if g.After[:8] == b.StartWAL[:8] && g.After >= b.StartWAL {
			return g, true
		}
	}
	return walGap{}, false
}

// gapErr refuses target, past the archive's end at gap g for database
// id's restores from the backup before g.
func gapErr(id string, target time.Time, g walGap) error {
	const f = time.RFC3339Nano
	if g.Until.IsZero() {
		return pandastack.Errorf(pandastack.EInvalid, "target_time %s falls in a gap in database %s's WAL archive: nothing written after %s was archived before archiving began again, and no base backup has finished since (take one: POST /v1/databases/%s/backups); restore to a moment before %s",
			target.Format(f), id, g.From.Format(f), id, g.From.Format(f))
	}
	return pandastack.Errorf(pandastack.EInvalid, "target_time %s falls in a gap in database %s's WAL archive: nothing written between %s and %s (the end of base backup %s) was archived; restore to a moment before the first or from the second on",
		target.Format(f), id, g.From.Format(f), g.Until.Format(f), g.Backup)
}

// restoreGaps is gaps as the backup list shows them.
func restoreGaps(gaps []walGap) []RestoreGap {
	var out []RestoreGap
	for _, g := range gaps {
		r := RestoreGap{From: g.From}
		if !g.Until.IsZero() {
			t := g.Until
			r.Until = &t
		}
		out = append(out, r)
	}
	return out
}
