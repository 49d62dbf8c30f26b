package hostagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// MaxForks bounds one fork request (the sandboxes service asks for at
// most pandastack's own limit; this is the host's).
const MaxForks = 10

// forkPrefix names a fork's checkpoint directory in the snapshot dir.
const forkPrefix = ".fork-"

// Fork makes copy-on-write children of a running machine, one per id in
// req.ChildIDs: each starts from the parent's exact state at the moment of
// the fork — memory, processes, disk — and from then on is a machine of its
// own. The parent keeps running. A hibernated parent is woken first.
func (a *Agent) Fork(ctx context.Context, req hostapi.ForkRequest) ([]hostapi.Machine, error) {
	id, count := req.ParentID, len(req.ChildIDs)
	if count < 1 || count > MaxForks {
		return nil, pandastack.Errorf(pandastack.EInvalid, "count must be between 1 and %d", MaxForks)
	}
	end, err := a.starts.begin()
	if err != nil {
		return nil, err
	}
	defer end()
	t0 := time.Now()
	dir, err := os.MkdirTemp(a.cfg.SnapshotDir, forkPrefix)
	if err != nil {
		return nil, saveError(fmt.Errorf("fork %s: %w", id, err), a.cfg.SnapshotDir, id, "could not save the sandbox for the fork")
	}
	forked := false
	defer func() {
		if forked {
			a.discard(dir) // off the fork's latency
		} else {
			a.remove(dir) // a failed fork leaves nothing when it answers
		}
	}()
	saved := filepath.Join(dir, "vm")
	parent, err := a.checkpoint(ctx, id, saved, "could not save the sandbox for the fork")
	if err != nil {
		return nil, err
	}
	tSaved := time.Since(t0)
	snap, err := vmm.LoadSaved(saved)
	if err != nil {
		return nil, fmt.Errorf("fork %s: %w", id, err)
	}
	var kids []hostapi.Machine
	for i, childID := range req.ChildIDs {
		csnap, vols := snap, req.Volumes[childID]
		if len(vols) > 0 {
			if csnap, err = a.keepVolumeCopies(snap, vols); err != nil {
				return kids, fmt.Errorf("fork %s: %w", id, err)
			}
		}
		cv, err := a.cfg.Driver.Restore(ctx, csnap, vmm.RestoreOptions{ID: childID, Network: a.policy(parent.ID)})
		if err != nil {
			a.dropVolumeFiles(vols)
			return kids, &pandastack.Error{Code: pandastack.EUnavailable, Message: fmt.Sprintf("fork %d of %d failed", i+1, count), Err: err}
		}
		if err := a.inheritNetwork(ctx, parent.ID, cv.ID()); err != nil {
			cv.Kill(context.Background())
			a.dropVolumeFiles(vols)
			return kids, err
		}
		tRestored := time.Since(t0)
		cc, err := a.connect(ctx, cv)
		if err != nil {
			cv.Kill(context.Background())
			a.dropVolumeFiles(vols)
			return kids, &pandastack.Error{Code: pandastack.EUnavailable, Message: "a forked sandbox did not answer", Err: err}
		}
		now := time.Now().UTC()
		rec := parent
		rec.ID, rec.State, rec.CreatedAt, rec.EndedAt, rec.EndReason, rec.Seq = cv.ID(), pandastack.StateRunning, now, nil, "", 1
		rec.ExpiresAt = parent.Lifetime.Expiry(now, parent.ExpiresAt.Sub(parent.CreatedAt))
		rec.Volumes = vols // kept copies; else the child runs on throwaway copies
		ks := newSandbox(rec, cv, cc)
		ks.volumes = len(vols) > 0
		if err := a.saveState(ks); err != nil {
			cc.Close()
			cv.Kill(context.Background())
			a.dropVolumeFiles(vols)
			return kids, fmt.Errorf("record fork: %w", err)
		}
		a.log.Debug("fork child ready", "sandbox", id, "child", rec.ID, "restored_ms", ms(tRestored), "ready_ms", ms(time.Since(t0)))
		a.mu.Lock()
		a.sbx[rec.ID] = ks
		a.mu.Unlock()
		go a.watch(ks)
		kids = append(kids, rec)
	}
	forked = true
	a.log.Info("sandbox forked", "sandbox", id, "children", count, "save_ms", ms(tSaved), "ms", ms(time.Since(t0)))
	return kids, nil
}

// checkpoint saves a live sandbox whole into dir (waking it first if it
// sleeps); the sandbox runs on. It returns the sandbox's record as saved.
// failMsg is what a user is told when the VMM cannot save it for another
// reason than a full disk (507 insufficient_storage).
func (a *Agent) checkpoint(ctx context.Context, id, dir, failMsg string) (hostapi.Machine, error) {
	s, err := a.get(ctx, id)
	if err != nil {
		return hostapi.Machine{}, err
	}
	if err := a.wake(ctx, s); err != nil {
		return hostapi.Machine{}, err
	}
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	v, client, rec := s.vm, s.client, s.rec
	s.mu.Unlock()
	if v == nil {
		return rec, pandastack.Errorf(pandastack.EConflict, "sandbox %s is not running", id)
	}
	// Refuse before pausing it when the disk is (nearly) full.
	if err := checkSpace(a.cfg.SnapshotDir, rec); err != nil {
		return rec, err
	}
	if err := client.Sync(ctx); err != nil {
		return rec, fmt.Errorf("save %s: sync guest disks: %w", id, err)
	}
	// On failure the driver removes what it wrote and resumes the VM.
	if err := a.cfg.Driver.Checkpoint(ctx, v, dir); err != nil {
		return rec, saveError(err, a.cfg.SnapshotDir, id, failMsg)
	}
	return rec, nil
}

// keepVolumeCopies makes the saved copies of a forked machine's volumes
// durable volumes (by reflink, into each one's own volume file) and
// returns snap with them in their slots, opened in place.
func (a *Agent) keepVolumeCopies(snap vmm.Snapshot, vols []hostapi.VolumeAttachment) (vmm.Snapshot, error) {
	if a.cfg.VolumeDir == "" {
		return snap, pandastack.Errorf(pandastack.EUnavailable, "this host keeps no volumes")
	}
	for _, v := range vols {
		if v.Slot < 0 || v.Slot >= vmm.VolumeSlots || !strings.HasPrefix(v.ID, "vol_") || v.ID != filepath.Base(v.ID) {
			a.dropVolumeFiles(vols)
			return snap, pandastack.Errorf(pandastack.EInvalid, "volume %q cannot go in slot %d", v.ID, v.Slot)
		}
		saved := snap.Volumes[v.Slot]
		if saved.Path == "" {
			a.dropVolumeFiles(vols)
			return snap, pandastack.Errorf(pandastack.EInvalid, "the machine has no volume in slot %d to keep as %s", v.Slot, v.ID)
		}
		file := a.volFile(v.ID)
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			a.dropVolumeFiles(vols)
			return snap, fmt.Errorf("keep volume copy %s: %w", v.ID, err)
		}
		if err := cowfs.Clone(file, saved.Path, 0o600); err != nil {
			a.dropVolumeFiles(vols)
			return snap, fmt.Errorf("keep volume copy %s: %w", v.ID, err)
		}
		snap.Volumes[v.Slot] = vmm.VolumeFile{Path: file}
	}
	return snap, nil
}

// dropVolumeFiles removes the files of volumes a failed fork was to keep.
func (a *Agent) dropVolumeFiles(vols []hostapi.VolumeAttachment) {
	for _, v := range vols {
		if strings.HasPrefix(v.ID, "vol_") && v.ID == filepath.Base(v.ID) {
			_ = os.RemoveAll(filepath.Dir(a.volFile(v.ID)))
		}
	}
}
