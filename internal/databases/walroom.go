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
//     EDQUOT, which PostgreSQL reports as 53100 "could not extend file"
//     like a full disk, and the WAL's room stays free.
//
// A volume formatted before project quotas (chattr -p fails there) keeps
// working as before, without the room.

// Quota projects on a database's volume.
const (
	projData = "1"
	projWAL  = "2"
)

// walRoomKB is the space kept for WAL on a volume of sizeMiB: its WAL
// budget (max_wal_size, which PostgreSQL may exceed between checkpoints)
// and half again for what a checkpoint or the archiver has not yet
// recycled.
func walRoomKB(sizeMiB int) int {
	return walBudgetMB(sizeMiB) * 1024 * 3 / 2
}

// walRoomArg is walRoomKB as a script's argument.
func walRoomArg(sizeMiB int) string { return strconv.Itoa(walRoomKB(sizeMiB)) }

// projectVolume is shell that puts the volume root ($vol) in the data
// project, inherited by what is made under it, and sets proj=1; on a
// volume without project quotas it sets proj=0.
const projectVolume = `proj=0; chattr +P -p ` + projData + ` "$vol" 2>/dev/null && proj=1
`

// walRoomFunc is shell defining walroom DIR...: with proj=1 it moves the
// WAL directories DIR into the WAL project and limits the data project to
// the volume's usable space (used + available to unprivileged writers)
// less $room KiB; it prints what it set.
const walRoomFunc = `walroom() {
  if [ "$proj" != 1 ]; then echo "walroom=none"; return 0; fi
  chattr -R +P -p ` + projWAL + ` "$@"
  usable=$(df -Pk "$vol" | awk 'NR==2 {print $3 + $4}')
  setquota -P ` + projData + ` 0 $((usable - room)) 0 0 "$vol"
  echo "walroom_kb=$room data_limit_kb=$((usable - room))"
}
`
