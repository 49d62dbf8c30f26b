package databases

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWALRoom: the room kept for WAL is twice its budget and a segment,
// and leaves the tables most of the default volume.
func TestWALRoom(t *testing.T) {
	for size, want := range map[int]int{128: 80 << 10, 1024: 144 << 10, 65536: 2064 << 10} {
		if got := walRoomKB(size); got != want {
			t.Errorf("volume %d MiB: %d KiB kept for WAL, want %d", size, got, want)
		}
	}
	if room := walRoomKB(DefaultSizeMiB); room*6 > DefaultSizeMiB<<10 {
		t.Errorf("the default volume (%d MiB) keeps %d KiB for WAL: more than a sixth", DefaultSizeMiB, room)
	}
}

// TestWALRoomScripts: both ways a cluster comes onto a volume (started
// there, restored to a point in time) keep the WAL's room before
// PostgreSQL starts, with pg_wal in the WAL project.
func TestWALRoomScripts(t *testing.T) {
	for name, script := range map[string]string{"start on the volume": dataScript, "point-in-time restore": recoverScript} {
		room := strings.Index(script, `walroom "$data/pg_wal"`)
		start := strings.Index(script, "start -D")
		if room < 0 || start < 0 || room > start {
			t.Errorf("%s: walroom at %d, pg_ctl start at %d:\n%s", name, room, start, script)
		}
		if !strings.Contains(script, `room="$1"`) {
			t.Errorf("%s: the room is not the script's argument", name)
		}
	}
	if !strings.Contains(recoverPrepare, "chattr +P -p "+projWAL+` "`+restoreWALDir+`"`) {
		t.Errorf("the WAL a restore copies in is not in the WAL project:\n%s", recoverPrepare)
	}
}

// TestWALRoomShell runs walroom with chattr, df and setquota replaced by
// recorders: pg_wal, its files and directories, goes into project 2
// (its directories passing it on), and project 1 is limited to the
// volume's used plus available space less the room; without project
// quotas it sets nothing.
func TestWALRoomShell(t *testing.T) {
	bin := t.TempDir()
	logf := filepath.Join(t.TempDir(), "calls")
	for name, body := range map[string]string{
		"chattr":   `echo "chattr $*" >> "$LOG"; [ -z "$NOPROJ" ]`,
		"setquota": `echo "setquota $*" >> "$LOG"`,
		"df":       `echo "Filesystem 1024-blocks Used Available Capacity Mounted on"; echo "/dev/vdb 126000 30000 90000 25% /pgdata"`,
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "pg_wal", "archive_status"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(noproj string) (string, string) {
		os.Remove(logf)
		script := `set -e; vol=/pgdata; data=` + data + `; room="$1"` + "\n" + walRoomFunc + projectVolume + `walroom "$data/pg_wal"`
		cmd := exec.Command("sh", "-c", script, "test", "49152")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LOG="+logf, "NOPROJ="+noproj)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("walroom: %v\n%s", err, out)
		}
		calls, _ := os.ReadFile(logf)
		return strings.TrimSpace(string(out)), string(calls)
	}
	out, calls := run("")
	wal := filepath.Join(data, "pg_wal")
	want := "chattr +P -p 1 /pgdata\nchattr -R -p 2 " + wal + "\nchattr +P " + wal + " " + wal + "/archive_status\nsetquota -P 1 0 70848 0 0 /pgdata\n"
	if calls != want || out != "walroom_kb=49152 data_limit_kb=70848" {
		t.Errorf("with project quotas: printed %q, ran\n%s\nwant\n%s", out, calls, want)
	}
	out, calls = run("1")
	if calls != "chattr +P -p 1 /pgdata\n" || out != "walroom=none" {
		t.Errorf("without project quotas: printed %q, ran\n%s", out, calls)
	}
}
