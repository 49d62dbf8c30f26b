package hostagent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/vmm"
)

// A volume is one raw file, formatted ext4 by the host when it is made
// (the host only ever formats an empty file; it never reads what a guest
// wrote), on the reflink filesystem so that forks and snapshots copy it by
// reflink. A VM opens the file itself, in one of its volume slots; the
// guest mounts it. The store records which live sandbox it is attached to.

// volumeFile is the name of a volume's file in its directory.
const volumeFile = "volume.raw"

// volFile is the file of volume id.
func (a *Agent) volFile(id string) string { return filepath.Join(a.cfg.VolumeDir, id, volumeFile) }

var volumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// CreateVolume makes an empty ext4 volume of sizeMiB on this host.
func (a *Agent) CreateVolume(ctx context.Context, teamID, name string, sizeMiB int) (pandastack.Volume, error) {
	if a.cfg.VolumeDir == "" {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EUnavailable, "this host keeps no volumes")
	}
	if !volumeName.MatchString(name) || strings.HasPrefix(name, "vol_") {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EInvalid,
			"volume name %q: use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit, not with \"vol_\"", name)
	}
	if sizeMiB < pandastack.MinVolumeMiB || sizeMiB > pandastack.MaxVolumeMiB {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EInvalid, "size_mib must be between %d and %d", pandastack.MinVolumeMiB, pandastack.MaxVolumeMiB)
	}
	if _, err := a.cfg.Store.VolumeByName(ctx, teamID, name); err == nil {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EConflict, "a volume named %q already exists", name)
	}
	if err := os.MkdirAll(a.cfg.VolumeDir, 0o700); err != nil {
		return pandastack.Volume{}, fmt.Errorf("create volume dir: %w", err)
	}
	free, err := a.volumeSpace()
	if err == nil && int64(sizeMiB)<<20 > free {
		cowfs.Settle(a.cfg.VolumeDir) // blocks a deletion frees come back in the background
		free, err = a.volumeSpace()
	}
	if err != nil {
		return pandastack.Volume{}, fmt.Errorf("create volume: %w", err)
	}
	if int64(sizeMiB)<<20 > free {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EInsufficientStorage,
			"a volume of %d MiB does not fit: this host has %d MiB free for volumes", sizeMiB, free>>20)
	}
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	v := pandastack.Volume{ID: "vol_" + hex.EncodeToString(b), TeamID: teamID, Name: name, SizeMiB: sizeMiB,
		Host: a.cfg.Host, CreatedAt: time.Now().UTC()}
	dir := filepath.Dir(a.volFile(v.ID))
	if err := a.makeVolumeFile(ctx, a.volFile(v.ID), int64(sizeMiB)<<20); err != nil {
		os.RemoveAll(dir)
		if isNoSpace(err, a.cfg.VolumeDir) {
			return pandastack.Volume{}, &pandastack.Error{Code: pandastack.EInsufficientStorage,
				Message: "the host's disk is full: the volume was not made", Err: err}
		}
		return pandastack.Volume{}, err
	}
	if err := a.cfg.Store.CreateVolume(ctx, v); err != nil {
		os.RemoveAll(dir)
		return pandastack.Volume{}, err
	}
	a.log.Info("volume created", "volume", v.ID, "name", name, "team", teamID, "size_mib", sizeMiB)
	return v, nil
}

// volumeSpace is what a new volume may take: the least free space of the
// volume filesystem and of the SpaceDirs.
func (a *Agent) volumeSpace() (int64, error) {
	free, err := cowfs.Free(a.cfg.VolumeDir)
	if err != nil {
		return 0, err
	}
	for _, d := range a.cfg.SpaceDirs {
		f, err := cowfs.Free(d)
		if err != nil {
			return 0, err
		}
		free = min(free, f)
	}
	return free, nil
}

// makeVolumeFile makes a sparse file of size bytes and formats it ext4.
func (a *Agent) makeVolumeFile(ctx context.Context, file string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("create volume: %w", err)
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("create volume: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		return fmt.Errorf("size volume: %w", err)
	}
	// The file is new and sparse: what mkfs leaves unwritten reads as
	// zeros, so lazy journal and inode table init are safe; nothing to
	// discard.
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "pandastack-vol",
		"-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", file)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("format volume: mkfs.ext4 not found (install e2fsprogs): %w", err)
		}
		return fmt.Errorf("format volume: %w: %s", err, strings.TrimSpace(out.String()))
	}
	return nil
}

// DeleteVolume removes a free volume: its record first (the store refuses
// an attached one, atomically), then its file.
func (a *Agent) DeleteVolume(ctx context.Context, id string) error {
	if err := a.cfg.Store.DeleteVolume(ctx, id); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Dir(a.volFile(id))); err != nil {
		return fmt.Errorf("delete volume %s files: %w", id, err)
	}
	a.log.Info("volume deleted", "volume", id)
	return nil
}

// resolveVolume finds a team's volume by id or name.
func (a *Agent) resolveVolume(ctx context.Context, teamID, ref string) (pandastack.Volume, error) {
	if strings.HasPrefix(ref, "vol_") {
		v, err := a.cfg.Store.GetVolume(ctx, ref)
		if err == nil && v.TeamID == teamID {
			return v, nil
		}
		if err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
			return v, err
		}
		return pandastack.Volume{}, pandastack.Errorf(pandastack.ENotFound, "volume %s not found", ref)
	}
	return a.cfg.Store.VolumeByName(ctx, teamID, ref)
}

// attachVolumes attaches a create's volumes to a reserved id, atomically
// each (a volume in use is EConflict), and returns what the VM's slots
// hold. On error nothing stays attached.
func (a *Agent) attachVolumes(ctx context.Context, req pandastack.CreateRequest, reserved string) ([vmm.VolumeSlots]vmm.VolumeFile, []pandastack.Volume, error) {
	var slots [vmm.VolumeSlots]vmm.VolumeFile
	var vols []pandastack.Volume
	if err := pandastack.CheckVolumeMounts(req.Volumes); err != nil {
		return slots, nil, err
	}
	if a.cfg.VolumeDir == "" {
		return slots, nil, pandastack.Errorf(pandastack.EUnavailable, "this host keeps no volumes")
	}
	for i, m := range req.Volumes {
		v, err := a.resolveVolume(ctx, req.TeamID, m.Volume)
		if err == nil && v.Host != a.cfg.Host {
			err = pandastack.Errorf(pandastack.EUnavailable, "volume %s is on host %s", v.Name, v.Host)
		}
		if err == nil {
			err = a.cfg.Store.AttachVolume(ctx, v.ID, reserved, m.Path, i)
		}
		if err != nil {
			if derr := a.cfg.Store.DetachVolumes(context.WithoutCancel(ctx), reserved); derr != nil {
				a.log.Error("detach volumes after a failed attach", "sandbox", reserved, "err", derr)
			}
			return slots, nil, err
		}
		v.SandboxID, v.MountPath, v.Slot = reserved, m.Path, i
		vols = append(vols, v)
		slots[i] = vmm.VolumeFile{Path: a.volFile(v.ID)}
	}
	return slots, vols, nil
}

// durableSlots are the volumes attached to sandbox id (for a wake).
func (a *Agent) durableSlots(ctx context.Context, teamID, id string, snap *vmm.Snapshot) (int, error) {
	vols, err := a.cfg.Store.ListVolumes(ctx, teamID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range vols {
		if v.SandboxID == id && v.Slot >= 0 && v.Slot < vmm.VolumeSlots {
			snap.Volumes[v.Slot] = vmm.VolumeFile{Path: a.volFile(v.ID)}
			n++
		}
	}
	return n, nil
}

// mountScript mounts the volume in slot (found by its serial) at dir once
// the guest sees its size (sectors of 512 bytes), then makes its root the
// template user's when the volume is new.
const mountScript = `set -e
slot="$1"; want="$2"; dir="$3"; owner="$4"
find_dev() { for d in /sys/block/vd*; do [ "$(cat "$d/serial" 2>/dev/null)" = "$slot" ] && { echo "${d##*/}"; return 0; }; done; return 1; }
dev=$(find_dev) || { echo "no block device with serial $slot" >&2; exit 1; }
i=0
while [ "$(cat /sys/block/$dev/size)" != "$want" ]; do
  i=$((i+1))
  if [ $i -eq 100 ]; then
    # The size change was not seen: probe the device again.
    vd=$(basename "$(readlink -f /sys/block/$dev/device)")
    echo "$vd" > /sys/bus/virtio/drivers/virtio_blk/unbind
    echo "$vd" > /sys/bus/virtio/drivers/virtio_blk/bind
    sleep 0.2
    dev=$(find_dev) || { echo "no block device with serial $slot after a re-probe" >&2; exit 1; }
    echo "reprobed" >&2
  fi
  [ $i -gt 600 ] && { echo "$slot ($dev) shows $(cat /sys/block/$dev/size) sectors, want $want" >&2; exit 1; }
  sleep 0.01
done
mkdir -p "$dir" || exit 3
[ -d "$dir" ] || { echo "$dir is not a directory" >&2; exit 3; }
mount -t ext4 -o nodev,nosuid "/dev/$dev" "$dir"
if [ -n "$owner" ] && [ "$owner" != root ] && [ "$(stat -c %u "$dir")" = 0 ] && [ "$(ls -A "$dir")" = lost+found ]; then
  chown "$owner": "$dir" 2>/dev/null || chown "$owner" "$dir"
fi
`

// mountVolumes mounts a new sandbox's volumes in its guest.
func (a *Agent) mountVolumes(ctx context.Context, client *guestconn.Client, tpl pandastack.Template, vols []pandastack.Volume) error {
	g := &guest{Client: client}
	applyDefaults(g, tpl.Defaults)
	for _, v := range vols {
		var stderr bytes.Buffer
		sectors := int64(v.SizeMiB) << 20 / 512
		res, err := client.Exec(ctx, pandastack.ExecRequest{Args: []string{"/bin/sh", "-c", mountScript, "mount-volume",
			fmt.Sprintf("vol%d", v.Slot), fmt.Sprint(sectors), v.MountPath, g.user}, User: "root", TimeoutSeconds: 30},
			nil, func(ev pandastack.ExecEvent) error {
				if ev.Type == "stderr" {
					stderr.Write(ev.Data)
				}
				return nil
			})
		if err == nil && res.ExitCode == 3 { // the path cannot hold a mount
			return pandastack.Errorf(pandastack.EInvalid, "cannot mount volume %s at %s: %s", v.Name, v.MountPath, lastLine(stderr.String()))
		}
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d: %s", res.ExitCode, strings.TrimSpace(stderr.String()))
		}
		if err != nil {
			return &pandastack.Error{Code: pandastack.EUnavailable, Message: fmt.Sprintf("could not mount volume %s at %s", v.Name, v.MountPath), Err: err}
		}
		if stderr.Len() > 0 {
			a.log.Info("volume mount", "volume", v.ID, "note", strings.TrimSpace(stderr.String()))
		}
	}
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// releaseVolumes frees the volumes attached to an ended sandbox. Their
// data stays in their files.
func (a *Agent) releaseVolumes(ctx context.Context, id string) {
	if err := a.cfg.Store.DetachVolumes(context.WithoutCancel(ctx), id); err != nil {
		a.log.Error("detach volumes", "sandbox", id, "err", err)
	}
}

// reconcileVolumes frees volumes attached to sandboxes that are not live
// (ended while the host was down, or a create that never finished), and
// removes volume files without a record (a create cut short).
func (a *Agent) reconcileVolumes(ctx context.Context) error {
	if a.cfg.VolumeDir == "" {
		return nil
	}
	vols, err := a.cfg.Store.ListVolumes(ctx, "")
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, v := range vols {
		if v.Host != a.cfg.Host {
			continue
		}
		known[v.ID] = true
		if v.SandboxID == "" {
			continue
		}
		rec, err := a.cfg.Store.GetSandbox(ctx, v.SandboxID)
		if err == nil && rec.State.Live() {
			continue
		}
		a.log.Info("freeing volume of an ended sandbox", "volume", v.ID, "sandbox", v.SandboxID)
		a.releaseVolumes(ctx, v.SandboxID)
	}
	ents, err := os.ReadDir(a.cfg.VolumeDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "vol_") && !known[e.Name()] {
			a.log.Info("removing volume files without a record", "volume", e.Name())
			os.RemoveAll(filepath.Join(a.cfg.VolumeDir, e.Name()))
		}
	}
	return nil
}
