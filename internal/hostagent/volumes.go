package hostagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// A volume is one raw file, formatted ext4 by the host when it is made
// (the host only ever formats an empty file; it never reads what a guest
// wrote), on the reflink filesystem so that forks and snapshots copy it by
// reflink. A VM opens the file itself, in one of its volume slots; the
// guest mounts it. The control plane records which machine it is attached
// to and passes it in the machine's spec; the host keeps the files.

// volumeFile is the name of a volume's file in its directory.
const volumeFile = "volume.raw"

// volFile is the file of volume id.
func (a *Agent) volFile(id string) string { return filepath.Join(a.cfg.VolumeDir, id, volumeFile) }

// CreateVolume makes an empty ext4 volume file of spec.SizeMiB for volume
// spec.ID on this host: EInsufficientStorage when it does not fit.
func (a *Agent) CreateVolume(ctx context.Context, spec hostapi.VolumeSpec) error {
	if a.cfg.VolumeDir == "" {
		return pandastack.Errorf(pandastack.EUnavailable, "this host keeps no volumes")
	}
	if !strings.HasPrefix(spec.ID, "vol_") || spec.ID != filepath.Base(spec.ID) {
		return pandastack.Errorf(pandastack.EInvalid, "invalid volume id %q", spec.ID)
	}
	if spec.SizeMiB < pandastack.MinVolumeMiB || spec.SizeMiB > pandastack.MaxVolumeMiB {
		return pandastack.Errorf(pandastack.EInvalid, "size_mib must be between %d and %d", pandastack.MinVolumeMiB, pandastack.MaxVolumeMiB)
	}
	sizeMiB := spec.SizeMiB
	if err := os.MkdirAll(a.cfg.VolumeDir, 0o700); err != nil {
		return fmt.Errorf("create volume dir: %w", err)
	}
	free, err := a.volumeSpace()
	if err == nil && int64(sizeMiB)<<20 > free {
		cowfs.Settle(a.cfg.VolumeDir) // blocks a deletion frees come back in the background
		free, err = a.volumeSpace()
	}
	if err != nil {
		return fmt.Errorf("create volume: %w", err)
	}
	if int64(sizeMiB)<<20 > free {
		return pandastack.Errorf(pandastack.EInsufficientStorage,
			"a volume of %d MiB does not fit: this host has %d MiB free for volumes", sizeMiB, free>>20)
	}
	dir := filepath.Dir(a.volFile(spec.ID))
	if err := a.makeVolumeFile(ctx, a.volFile(spec.ID), int64(sizeMiB)<<20); err != nil {
		os.RemoveAll(dir)
		if isNoSpace(err, a.cfg.VolumeDir) {
			return &pandastack.Error{Code: pandastack.EInsufficientStorage,
				Message: "the host's disk is full: the volume was not made", Err: err}
		}
		return err
	}
	a.log.Info("volume file created", "volume", spec.ID, "size_mib", sizeMiB)
	return nil
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
	// discard. Project quotas are tracked (the guest mounts it with
	// prjquota) so a user of the volume can keep part of it for one
	// directory: a database keeps its WAL's room that way. They need
	// 256-byte inodes, which mkfs would not give a small volume by itself.
	cmd := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-L", "pandastack-vol", "-I", "256",
		"-O", "quota,project", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1,quotatype=prjquota", file)
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

// DeleteVolume removes volume id's file (the caller has checked that it is
// free).
func (a *Agent) DeleteVolume(ctx context.Context, id string) error {
	if a.cfg.VolumeDir == "" {
		return nil
	}
	if !strings.HasPrefix(id, "vol_") || id != filepath.Base(id) {
		return pandastack.Errorf(pandastack.EInvalid, "invalid volume id %q", id)
	}
	if err := os.RemoveAll(filepath.Dir(a.volFile(id))); err != nil {
		return fmt.Errorf("delete volume %s files: %w", id, err)
	}
	a.log.Info("volume deleted", "volume", id)
	return nil
}

// volumeSlots is what a new machine's volume slots open: each volume's
// file, in its slot.
func (a *Agent) volumeSlots(vols []hostapi.VolumeAttachment) ([vmm.VolumeSlots]vmm.VolumeFile, error) {
	var slots [vmm.VolumeSlots]vmm.VolumeFile
	if a.cfg.VolumeDir == "" {
		return slots, pandastack.Errorf(pandastack.EUnavailable, "this host keeps no volumes")
	}
	for _, v := range vols {
		if v.Slot < 0 || v.Slot >= vmm.VolumeSlots || !strings.HasPrefix(v.ID, "vol_") || v.ID != filepath.Base(v.ID) {
			return slots, pandastack.Errorf(pandastack.EInvalid, "volume %q cannot go in slot %d", v.ID, v.Slot)
		}
		if _, err := os.Stat(a.volFile(v.ID)); err != nil {
			return slots, &pandastack.Error{Code: pandastack.EUnavailable, Message: fmt.Sprintf("volume %s has no file on this host", v.Name), Err: err}
		}
		slots[v.Slot] = vmm.VolumeFile{Path: a.volFile(v.ID)}
	}
	return slots, nil
}

// durableSlots puts a waking machine's attached volumes in snap's slots
// and says how many there are.
func (a *Agent) durableSlots(vols []hostapi.VolumeAttachment, snap *vmm.Snapshot) int {
	n := 0
	for _, v := range vols {
		if v.Slot >= 0 && v.Slot < vmm.VolumeSlots {
			snap.Volumes[v.Slot] = vmm.VolumeFile{Path: a.volFile(v.ID)}
			n++
		}
	}
	return n
}

// mountScript mounts the volume in slot (found by its serial) at dir once
// the guest sees its size (sectors of 512 bytes), then makes its root the
// template user's when the volume is new. Project quota limits are
// enforced (prjquota) on a volume formatted with them; one formatted
// before them mounts without.
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
mount -t ext4 -o nodev,nosuid,prjquota "/dev/$dev" "$dir" 2>/dev/null || mount -t ext4 -o nodev,nosuid "/dev/$dev" "$dir"
if [ -n "$owner" ] && [ "$owner" != root ] && [ "$(stat -c %u "$dir")" = 0 ] && [ "$(ls -A "$dir")" = lost+found ]; then
  chown "$owner": "$dir" 2>/dev/null || chown "$owner" "$dir"
fi
`

// mountVolumes mounts a new sandbox's volumes in its guest.
func (a *Agent) mountVolumes(ctx context.Context, client *guestconn.Client, tpl pandastack.Template, vols []hostapi.VolumeAttachment) error {
	g := &guest{Client: client, log: a.log}
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

// pruneVolumes removes volume files without a record (a create cut
// short): keep are the volumes the caller knows.
func (a *Agent) pruneVolumes(keep []string) error {
	if a.cfg.VolumeDir == "" {
		return nil
	}
	known := map[string]bool{}
	for _, id := range keep {
		known[id] = true
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
