package sandboxes

import (
	"context"
	"regexp"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

var volumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// CreateVolume makes an empty volume of sizeMiB, named within the team,
// on the host: EInvalid for a bad name or size, EConflict for a taken
// name, EInsufficientStorage when the host has no room.
func (e *Engine) CreateVolume(ctx context.Context, teamID, name string, sizeMiB int) (pandastack.Volume, error) {
	return e.CreateManagedVolume(ctx, teamID, name, sizeMiB, "")
}

// CreateManagedVolume is CreateVolume for a platform service's volume
// (pandastack.Volume.ManagedBy): only machines of managedBy attach it,
// and the volume API does not delete it.
func (e *Engine) CreateManagedVolume(ctx context.Context, teamID, name string, sizeMiB int, managedBy string) (pandastack.Volume, error) {
	if !volumeName.MatchString(name) || strings.HasPrefix(name, "vol_") {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EInvalid,
			"volume name %q: use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit, not with \"vol_\"", name)
	}
	if sizeMiB < pandastack.MinVolumeMiB || sizeMiB > pandastack.MaxVolumeMiB {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EInvalid, "size_mib must be between %d and %d", pandastack.MinVolumeMiB, pandastack.MaxVolumeMiB)
	}
	if _, err := e.cfg.Store.VolumeByName(ctx, teamID, name); err == nil {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.EConflict, "a volume named %q already exists", name)
	}
	v := pandastack.Volume{ID: pandastack.NewID("vol_"), TeamID: teamID, Name: name, SizeMiB: sizeMiB,
		Host: e.cfg.Host.Name(), CreatedAt: time.Now().UTC(), ManagedBy: managedBy}
	if err := e.cfg.Host.CreateVolume(ctx, hostapi.VolumeSpec{ID: v.ID, SizeMiB: sizeMiB}); err != nil {
		return pandastack.Volume{}, err
	}
	if err := e.cfg.Store.CreateVolume(ctx, v); err != nil {
		if derr := e.cfg.Host.DeleteVolume(context.WithoutCancel(ctx), v.ID); derr != nil {
			e.log.Error("remove file of an unrecorded volume", "volume", v.ID, "err", derr)
		}
		return pandastack.Volume{}, err
	}
	e.log.Info("volume created", "volume", v.ID, "name", name, "team", teamID, "size_mib", sizeMiB)
	return v, nil
}

// DeleteVolume removes a free volume: its record first (the store refuses
// an attached one, atomically), then its file.
func (e *Engine) DeleteVolume(ctx context.Context, id string) error {
	if err := e.cfg.Store.DeleteVolume(ctx, id); err != nil {
		return err
	}
	return e.cfg.Host.DeleteVolume(ctx, id)
}

// resolveVolume finds a team's volume by id or name.
func (e *Engine) resolveVolume(ctx context.Context, teamID, ref string) (pandastack.Volume, error) {
	if strings.HasPrefix(ref, "vol_") {
		v, err := e.cfg.Store.GetVolume(ctx, ref)
		if err == nil && v.TeamID == teamID {
			return v, nil
		}
		if err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
			return v, err
		}
		return pandastack.Volume{}, pandastack.Errorf(pandastack.ENotFound, "volume %s not found", ref)
	}
	return e.cfg.Store.VolumeByName(ctx, teamID, ref)
}

// attachVolumes attaches a create's volumes to sandbox id, atomically each
// (a volume in use is EConflict), and returns them as the host opens
// them. On error nothing stays attached.
func (e *Engine) attachVolumes(ctx context.Context, teamID, id, managedBy string, mounts []pandastack.VolumeMount) ([]hostapi.VolumeAttachment, error) {
	if err := pandastack.CheckVolumeMounts(mounts); err != nil {
		return nil, err
	}
	var out []hostapi.VolumeAttachment
	for i, m := range mounts {
		v, err := e.resolveVolume(ctx, teamID, m.Volume)
		if err == nil && v.Host != e.cfg.Host.Name() {
			err = pandastack.Errorf(pandastack.EUnavailable, "volume %s is on host %s", v.Name, v.Host)
		}
		if err == nil && v.ManagedBy != managedBy {
			kind, of := pandastack.SplitManagedBy(v.ManagedBy)
			err = pandastack.Errorf(pandastack.EConflict, "volume %s holds the data of %s %s and attaches only to its machines", v.Name, kind, of)
		}
		if err == nil {
			err = e.cfg.Store.AttachVolume(ctx, v.ID, id, m.Path, i)
		}
		if err != nil {
			e.detach(ctx, id)
			return nil, err
		}
		out = append(out, hostapi.VolumeAttachment{ID: v.ID, Name: v.Name, SizeMiB: v.SizeMiB, MountPath: m.Path, Slot: i})
	}
	return out, nil
}
