package databases

import "strconv"

// A database's WAL and its tables share one volume. PostgreSQL takes a
// table that cannot grow as a failed statement (SQLSTATE 53100) and goes
// on, but WAL that cannot get a new segment file stops the whole server
// (a PANIC and crash recovery, every session dropped). Bounding the WAL
// (walsize.go) is not enough on its own: a volume filled quickly after a
// create, or while archiving lags, still needs a segment file the tables
// took. So the tables cannot take the WAL's room: the volume is formatted
// with ext4 project quotas (hostagent), mounted with prjquota, and
//
//   - everything on it is in project 1 (the volume root inherits it),
//     except pg_wal and the WAL a point-in-time restore copies in, which are
//     in project 2;
//   - project 1 has a hard limit of the volume's usable space minus
//     walRoomKB: a statement that would grow the tables past it fails with
//     EDQUOT, which PostgreSQL reports as "could not extend file ... Disk
//     quota exceeded" (SQLSTATE XX000: it gives 53100 to ENOSPC only), and
//     the WAL's room stays free.
//
// A volume formatted before project quotas (chattr -p fails there) keeps
// working as before, without the room.

// Quota projects on a database's volume.
const (
	projData = "1"
	projWAL  = "2"
)

// walRoomKB is the space kept for WAL on a volume of sizeMiB. pg_wal
// holds what the last checkpoint still needs, up to the budget B
// (max_wal_size), and segment files recycled ahead of it, up to B past
// that checkpoint (min_wal_size = max_wal_size); or, with the archiver
// behind, what its slot keeps (max_slot_wal_keep_size = B) before the
// insert position. Either way at most 2B, and a segment more for the
// one being started: 2B + 16 MB. (Measured: 1.5B was not enough on a
// 128 MiB volume filled three times over.)
func walRoomKB(sizeMiB int) int {
	return (2*walBudgetMB(sizeMiB) + 16) * 1024
}

// walRoomArg is walRoomKB as a script's argument.
func walRoomArg(sizeMiB int) string { return strconv.Itoa(walRoomKB(sizeMiB)) }

// projectVolume is shell that puts the volume root ($vol) in the data
// project, inherited by what is made under it, and sets proj=1; on a
// volume without project quotas it sets proj=0. A machine without the
// tools is an error, not a volume without the room.
const projectVolume = `command -v chattr >/dev/null && command -v setquota >/dev/null || { echo "chattr (e2fsprogs) and setquota (quota) are missing from the machine" >&2; exit 1; }
proj=0; chattr +P -p ` + projData + ` "$vol" 2>/dev/null && proj=1
`

// walRoomFunc is shell defining walroom DIR...: with proj=1 it moves the
// WAL directories DIR (their files and, inherited, what is made in them;
// the inherit flag is for directories only) into the WAL project and limits the data project to
// the volume's usable space (used + available to unprivileged writers)
// less $room KiB; it prints what it set.
const walRoomFunc = `walroom() {
  if [ "$proj" != 1 ]; then echo "walroom=none"; return 0; fi
  chattr -R -p ` + projWAL + ` "$@"
  find "$@" -type d -exec chattr +P {} +
  usable=$(df -Pk "$vol" | awk 'NR==2 {print $3 + $4}')
  setquota -P ` + projData + ` 0 $((usable - room)) 0 0 "$vol"
  echo "walroom_kb=$room data_limit_kb=$((usable - room))"
}
`
