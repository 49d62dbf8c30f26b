package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// vsh runs cmd in sb and returns its stdout, trimmed; a failure ends the test.
func vsh(t *testing.T, sb *sdk.Sandbox, cmd string) string {
	t.Helper()
	r, err := sb.Exec(context.Background(), cmd, sdk.ExecOptions{TimeoutSeconds: 60})
	if err != nil {
		t.Fatalf("%s: exec %q: %v", sb.ID, cmd, err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("%s: %q exited %d: %s", sb.ID, cmd, r.ExitCode, r.Stderr)
	}
	return strings.TrimSpace(string(r.Stdout))
}

// wantAPIError checks err's HTTP status and code.
func wantAPIError(t *testing.T, err error, status int, code, what string) {
	t.Helper()
	var ae *sdk.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: got %v, want HTTP %d %s", what, err, status, code)
	}
	if ae.Status != status || ae.Code != code || ae.Message == "" {
		t.Fatalf("%s: got HTTP %d %s %q, want HTTP %d %s with a message", what, ae.Status, ae.Code, ae.Message, status, code)
	}
}

// holders lists the processes that have file open.
func holders(file string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == file {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// volumeDir is where a server keeps volume id's file.
func volumeDir(s *serverProc, id string) string {
	return filepath.Join(s.dataDir, "cow", "volumes", id)
}

// The life of a volume on one server: bad input refused, data that
// survives kill and hibernate, forks and snapshots that get copies, and
// nothing left behind.
func TestVolumes(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "volumes")

	// Bad input: each a clear error, nothing made.
	_, err := c.CreateVolume(ctx, "tiny", 8)
	wantAPIError(t, err, 400, "invalid_argument", "a volume under 16 MiB")
	_, err = c.CreateVolume(ctx, "../x", 64)
	wantAPIError(t, err, 400, "invalid_argument", "a bad volume name")
	if free, err := cowfs.Free(filepath.Join(main.dataDir, "cow")); err != nil || free >= 1<<40 {
		t.Logf("the VM filesystem has %d bytes free (%v): no valid size exceeds it, so the 507 case is not run", free, err)
	} else {
		// The team's disk quota answers first; with the quota lifted, the
		// host's free space does.
		_, err = c.CreateVolume(ctx, "huge", 1<<20) // 1 TiB, the largest valid size
		wantAPIError(t, err, 429, "quota_exceeded", "a volume larger than the team's disk quota")
		admin := main.client(main.admin)
		if _, err := admin.SetTeamQuotas(ctx, "volumes", sdk.QuotaUpdate{MaxDiskGiB: ptr(0)}); err != nil {
			t.Fatal(err)
		}
		_, err = c.CreateVolume(ctx, "huge", 1<<20)
		wantAPIError(t, err, 507, "insufficient_storage", "a volume larger than the free disk")
		if _, err := admin.SetTeamQuotas(ctx, "volumes", sdk.QuotaUpdate{Reset: []string{"max_disk_gib"}}); err != nil {
			t.Fatal(err)
		}
	}
	if list, err := c.ListVolumes(ctx); err != nil || len(list) != 0 {
		t.Fatalf("volumes after refused creates: %v %+v", err, list)
	}

	vol, err := c.CreateVolume(ctx, "data", 64)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(vol.ID, "vol_") || vol.SizeMiB != 64 || vol.SandboxID != "" {
		t.Fatalf("new volume: %+v", vol)
	}
	_, err = c.CreateVolume(ctx, "data", 64)
	wantAPIError(t, err, 409, "conflict", "a taken volume name")

	// Another team sees nothing of it.
	other := teamClient(t, "volumes-other")
	_, err = other.GetVolume(ctx, vol.ID)
	wantAPIError(t, err, 404, "not_found", "another team's volume")
	_, err = other.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 60,
		Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/data"}}})
	wantAPIError(t, err, 404, "not_found", "attach another team's volume")

	// Attached at create, by name; the guest sees its whole size.
	t0 := time.Now()
	a := newSandbox(t, c, sdk.CreateSandboxParams{Volumes: []sdk.VolumeMount{{Volume: "data", Path: "/data"}}})
	t.Logf("create with a volume (a pooled QEMU takes its file, resize, mount) took %v", time.Since(t0))
	if kb, _ := strconv.Atoi(vsh(t, a, "df -k --output=size /data | tail -1")); kb < 50_000 {
		t.Fatalf("/data is %d kB, want the 64 MiB volume's size", kb)
	}
	if got := vsh(t, a, "findmnt -n -o FSTYPE /data"); got != "ext4" {
		t.Fatalf("/data is %q, want an ext4 mount", got)
	}
	if b, err := os.ReadFile(main.log); err == nil && strings.Contains(string(b), "reprobed") {
		t.Logf("the guest missed the size change and re-probed the volume's device")
	}
	sum := vsh(t, a, "head -c 3000000 /dev/urandom > /data/blob && sha256sum /data/blob | cut -d' ' -f1")
	got, err := c.GetVolume(ctx, "data")
	if err != nil || got.SandboxID != a.ID || got.MountPath != "/data" {
		t.Fatalf("attached volume: %v %+v", err, got)
	}
	if sb, err := c.GetSandbox(ctx, a.ID); err != nil || len(sb.Volumes) != 1 || sb.Volumes[0] != (sdk.VolumeMount{Volume: vol.ID, Path: "/data"}) {
		t.Fatalf("the sandbox shows volumes %v %+v", err, sb)
	}
	// The sandbox's QEMU may be a pooled one (it keeps the name it was
	// started with): vmPID finds it by the sandbox's VM record.
	if h := holders(filepath.Join(volumeDir(main, vol.ID), "volume.raw")); len(h) != 1 || h[0] != vmPID(main.dataDir, a.ID) {
		t.Fatalf("the volume file is open in %v, want in the sandbox's QEMU alone", h)
	}

	// In use: not attached twice, not deleted; the holder keeps it.
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 60,
		Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/other"}}})
	wantAPIError(t, err, 409, "conflict", "attach a volume in use")
	wantAPIError(t, c.DeleteVolume(ctx, vol.ID), 409, "conflict", "delete an attached volume")
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != a.ID {
		t.Fatalf("after refused attach and delete, the volume reads %+v", got)
	}

	// A fork gets a copy: same bytes; its writes and the parent's after
	// the fork are invisible to each other; the volume stays the parent's.
	t0 = time.Now()
	kid, err := a.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork of a sandbox with a volume took %v", time.Since(t0))
	if s := vsh(t, kid, "sha256sum /data/blob | cut -d' ' -f1"); s != sum {
		t.Fatalf("fork's copy of the volume: sum %s, want %s", s, sum)
	}
	vsh(t, kid, "echo kid > /data/kid.txt && sync")
	vsh(t, a, "echo parent > /data/parent.txt && sync")
	if s := vsh(t, a, "ls /data"); strings.Contains(s, "kid.txt") {
		t.Fatalf("the fork's write shows in the parent's volume: %s", s)
	}
	if s := vsh(t, kid, "ls /data"); strings.Contains(s, "parent.txt") {
		t.Fatalf("the parent's write shows in the fork's copy: %s", s)
	}
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != a.ID {
		t.Fatalf("after the fork the volume reads %+v", got)
	}
	// The fork's copy is its own through hibernate and wake, and a fork of
	// the fork gets a copy of that copy.
	if err := kid.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	if s := vsh(t, kid, "cat /data/kid.txt; sha256sum /data/blob | cut -d' ' -f1"); s != "kid\n"+sum {
		t.Fatalf("the fork's copy after wake reads %q", s)
	}
	grandkid, err := kid.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := vsh(t, grandkid, "cat /data/kid.txt; echo grandkid > /data/kid.txt; sync"); s != "kid" {
		t.Fatalf("the fork of the fork reads %q", s)
	}
	if s := vsh(t, kid, "cat /data/kid.txt"); s != "kid" {
		t.Fatalf("the grandchild's write shows in its parent's copy: %q", s)
	}
	for _, k := range []*sdk.Sandbox{kid, grandkid} {
		if err := k.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the fork's files (and its volume copy) removed", func() bool {
			_, err := os.Stat(filepath.Join(main.dataDir, "cow", "hibernated", k.ID))
			return !slices.Contains(vmDirs(main.dataDir), k.ID) && errors.Is(err, os.ErrNotExist)
		})
	}

	// A snapshot keeps a copy; a sandbox made from it mounts that copy.
	sn, err := a.Snapshot(ctx, "with-volume")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID, TTLSeconds: 60,
		Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/data"}}})
	wantAPIError(t, err, 400, "invalid_argument", "volumes with a snapshot")
	fromSnap := newSandbox(t, c, sdk.CreateSandboxParams{Snapshot: sn.ID})
	if s := vsh(t, fromSnap, "sha256sum /data/blob | cut -d' ' -f1; cat /data/parent.txt"); s != sum+"\nparent" {
		t.Fatalf("snapshot's copy of the volume reads %q", s)
	}
	vsh(t, fromSnap, "echo snap > /data/snap.txt && sync")
	if err := fromSnap.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, sn.ID); err != nil {
		t.Fatal(err)
	}

	// Hibernate and wake: the same volume, the same bytes, still writable.
	if err := a.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != a.ID {
		t.Fatalf("a hibernated sandbox keeps its volume; it reads %+v", got)
	}
	wantAPIError(t, c.DeleteVolume(ctx, vol.ID), 409, "conflict", "delete the volume of a hibernated sandbox")
	if s := vsh(t, a, "sha256sum /data/blob | cut -d' ' -f1"); s != sum {
		t.Fatalf("after wake: sum %s, want %s", s, sum)
	}
	vsh(t, a, "echo woken > /data/woken.txt")

	// Kill: the volume is free, its data kept (what the guest had not yet
	// flushed included: a kill syncs first).
	if err := a.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != "" || got.MountPath != "" {
		t.Fatalf("after kill the volume reads %+v", got)
	}
	volFile := filepath.Join(volumeDir(main, vol.ID), "volume.raw")
	eventually(t, 10*time.Second, "no process holding the volume after the kill", func() bool { return len(holders(volFile)) == 0 })

	// A create that fails after the attach (the guest cannot mount there)
	// frees the volume and leaves no VM holding it.
	_, err = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 60,
		Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/var/lib/dpkg/status/x"}}})
	wantAPIError(t, err, 400, "invalid_argument", "a mount path the guest cannot use")
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != "" {
		t.Fatalf("after a failed create the volume reads %+v", got)
	}
	eventually(t, 10*time.Second, "no process holding the volume after a failed create", func() bool { return len(holders(volFile)) == 0 })

	// Two creates racing for one volume: one gets it, the other 409.
	var wg sync.WaitGroup
	racers := make([]*sdk.Sandbox, 2)
	errs := make([]error, 2)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			racers[i], errs[i] = c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 60,
				Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/data"}}})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		if err == nil {
			won++
			if err := racers[i].Kill(ctx); err != nil {
				t.Fatal(err)
			}
			continue
		}
		wantAPIError(t, err, 409, "conflict", "the losing racer")
	}
	if won != 1 {
		t.Fatalf("%d of 2 racing creates got the volume, want 1 (%v)", won, errs)
	}
	eventually(t, 10*time.Second, "no process holding the volume after the race", func() bool { return len(holders(volFile)) == 0 })

	b := newSandbox(t, c, sdk.CreateSandboxParams{Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/mnt/v"}}})
	if s := vsh(t, b, "sha256sum /mnt/v/blob | cut -d' ' -f1; cat /mnt/v/parent.txt /mnt/v/woken.txt; ls /mnt/v"); s != sum+"\nparent\nwoken\nblob\nlost+found\nparent.txt\nwoken.txt" {
		t.Fatalf("the volume in a new sandbox reads %q", s)
	}
	vsh(t, b, "echo expiring > /mnt/v/expiring.txt") // not synced: expiry does it
	if err := b.SetTTL(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// TTL expiry frees the volume like a kill, with what the guest wrote.
	eventually(t, 20*time.Second, "the expired sandbox's volume freed", func() bool {
		got, err := c.GetVolume(ctx, vol.ID)
		return err == nil && got.SandboxID == ""
	})
	if got, _ := c.GetSandbox(ctx, b.ID); got.State != "expired" {
		t.Fatalf("sandbox after its TTL: %+v", got)
	}
	b2 := newSandbox(t, c, sdk.CreateSandboxParams{Volumes: []sdk.VolumeMount{{Volume: vol.ID, Path: "/data"}}})
	if s := vsh(t, b2, "cat /data/expiring.txt"); s != "expiring" {
		t.Fatalf("after expiry the volume reads %q", s)
	}
	if err := b2.Kill(ctx); err != nil {
		t.Fatal(err)
	}

	// Delete: the record and the file go.
	if _, err := os.Stat(volumeDir(main, vol.ID)); err != nil {
		t.Fatalf("volume file before delete: %v", err)
	}
	if err := c.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetVolume(ctx, vol.ID)
	wantAPIError(t, err, 404, "not_found", "a deleted volume")
	if _, err := os.Stat(volumeDir(main, vol.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume files after delete: %v", err)
	}
}

// Volumes survive server restarts: a crash leaves the sandbox running with
// its volume; a sandbox whose VM died while the server was down is failed
// and its volume freed, with what the guest had synced.
func TestVolumesRestart(t *testing.T) {
	ctx := context.Background()
	s, dir := newTestServer(t, "ps-volrestart-")
	defer func() { s.stop() }() // the last one started on dir
	c := s.client(s.admin)
	vol, err := c.CreateVolume(ctx, "keep", 32)
	if err != nil {
		t.Fatal(err)
	}
	mount := []sdk.VolumeMount{{Volume: "keep", Path: "/data"}}
	a, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600, Volumes: mount})
	if err != nil {
		t.Fatal(err)
	}
	sum := vsh(t, a, "head -c 1000000 /dev/urandom > /data/blob && sync && sha256sum /data/blob | cut -d' ' -f1")
	// A hibernated sandbox keeps its volume across the restart.
	if _, err := c.CreateVolume(ctx, "sleepy", 16); err != nil {
		t.Fatal(err)
	}
	sleepy, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600,
		Volumes: []sdk.VolumeMount{{Volume: "sleepy", Path: "/sleepy"}}})
	if err != nil {
		t.Fatal(err)
	}
	vsh(t, sleepy, "echo dreams > /sleepy/d.txt")
	if err := sleepy.Hibernate(ctx); err != nil {
		t.Fatal(err)
	}

	// A crash: the VM runs on with its volume; the next server re-attaches.
	s.crash()
	if s, err = startServer(dir); err != nil {
		t.Fatal(err)
	}
	c = s.client(s.admin)
	a = c.Sandbox(a.ID)
	if got := vsh(t, a, "sha256sum /data/blob | cut -d' ' -f1"); got != sum {
		t.Fatalf("after restart: sum %s, want %s", got, sum)
	}
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != a.ID {
		t.Fatalf("after restart the volume reads %+v", got)
	}
	sleepy = c.Sandbox(sleepy.ID)
	if got := vsh(t, sleepy, "cat /sleepy/d.txt; echo awake >> /sleepy/d.txt"); got != "dreams" {
		t.Fatalf("hibernated sandbox woken after restart reads %q", got)
	}
	if got, _ := c.GetVolume(ctx, "sleepy"); got.SandboxID != sleepy.ID {
		t.Fatalf("after restart and wake the volume reads %+v", got)
	}
	if err := sleepy.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, "sleepy"); err != nil {
		t.Fatal(err)
	}

	// The re-attached VM still knows its volume: a fork gets a copy of it.
	kid, err := a.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := vsh(t, kid, "sha256sum /data/blob | cut -d' ' -f1"); got != sum {
		t.Fatalf("fork after restart: sum %s, want %s", got, sum)
	}
	if err := kid.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	vsh(t, a, "echo restarted > /data/restarted.txt") // not synced: the kill does it
	if err := a.Kill(ctx); err != nil {
		t.Fatal(err)
	}

	// A VM that dies while the server is down: its sandbox fails at the next
	// start and its volume is freed.
	b, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600, Volumes: mount})
	if err != nil {
		t.Fatal(err)
	}
	if got := vsh(t, b, "cat /data/restarted.txt; echo died > /data/died.txt; sync; sha256sum /data/blob | cut -d' ' -f1"); got != "restarted\n"+sum {
		t.Fatalf("second sandbox reads %q", got)
	}
	s.crash()
	if pid := vmPID(dir, b.ID); qemuRunning(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	} else {
		t.Fatalf("no QEMU for sandbox %s (pid %d)", b.ID, pid)
	}
	if s, err = startServer(dir); err != nil {
		t.Fatal(err)
	}
	c = s.client(s.admin)
	if got, err := c.GetSandbox(ctx, b.ID); err != nil || got.State != "failed" {
		t.Fatalf("sandbox whose VM died while the server was down: %v %+v", err, got)
	}
	if got, _ := c.GetVolume(ctx, vol.ID); got.SandboxID != "" {
		t.Fatalf("the failed sandbox's volume reads %+v", got)
	}
	d, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 600, Volumes: mount})
	if err != nil {
		t.Fatal(err)
	}
	if got := vsh(t, d, "cat /data/restarted.txt /data/died.txt"); got != "restarted\ndied" {
		t.Fatalf("third sandbox reads %q", got)
	}
	if err := d.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteVolume(ctx, vol.ID); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "cow", "volumes")); len(ents) != 0 {
		t.Fatalf("volume files left: %v", ents)
	}
}
