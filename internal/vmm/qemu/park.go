package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
	"golang.org/x/sys/unix"
)

// A hibernation writes everything a wake needs into its directory, and the
// VM's process used to end right there. A wake then starts QEMU again, and
// under TCG every instruction the guest runs after that is translated anew:
// a database's first query after a wake cost ~450 ms of the vCPU's time
// against ~75 ms for the same query in a running VM. So the process is now
// parked instead, for a while: its guest stays stopped (no CPU), its RAM
// file is written back (clean pages the kernel may reclaim), and a wake of
// the same sandbox within that time moves the files back and continues it.
// What a parked process still holds is its own memory (QEMU's heap and
// translated code: 30-300 MB under TCG, more the longer the guest ran);
// ParkFor, MaxParked and ParkMemory bound it.
// Anything else — the time passing, more VMs parked than allowed, its
// hibernation directory changed or removed, the server stopping — ends the
// process, and a wake restores from the directory as before. A hibernated
// sandbox therefore never depends on a parked process: it is a cache.

// parkPrefix names the directories of parked processes. Like reapPrefix
// it starts with a dot: List does not report them.
const parkPrefix = ".park-"

// Parking's defaults.
const (
	DefaultParkFor   = 10 * time.Minute
	DefaultMaxParked = 16
)

// parked is a hibernated VM's process kept for a wake.
type parked struct {
	id  string // the VM's id (its process's directory is parkPrefix+id)
	v   *vm
	dir string // the hibernation directory
	// files moved from the VM's directory into dir, by name, with the
	// inode each had: a wake finds the same files or does not continue.
	files map[string]uint64
	vols  [vmm.VolumeSlots]uint64 // durable volumes' inodes (0: none)
	at    time.Time
	anon  int64 // the process's own memory when parked, bytes
}

// setParkLimits fixes, once at New, how long and how many processes are
// kept and how much of their own memory at most (parkFor 0: parking off).
func (d *Driver) setParkLimits() {
	if d.cfg.ParkFor < 0 || d.cfg.MaxParked < 0 || os.Getenv("PANDASTACK_PARK") == "off" {
		return
	}
	d.parkFor, d.maxParked, d.parkBudget = d.cfg.ParkFor, d.cfg.MaxParked, d.cfg.ParkMemory
	if d.parkFor == 0 {
		d.parkFor = DefaultParkFor
	}
	if d.maxParked == 0 {
		d.maxParked = DefaultMaxParked
	}
	if d.parkBudget == 0 {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			d.parkBudget = int64(si.Totalram) * int64(si.Unit) / 8
		}
	}
}

// anonBytes is a process's own resident memory (resident less what is
// file-backed or shared: /proc/PID/statm), or 0.
func anonBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	var size, resident, shared int64
	if _, err := fmt.Sscan(string(b), &size, &resident, &shared); err != nil {
		return 0
	}
	return (resident - shared) * int64(os.Getpagesize())
}

// inode is path's inode number, or 0.
func inode(path string) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	return st.Ino
}

// park keeps q, whose state and files are in dir now, for a wake. The
// oldest parked processes end when more than allowed are kept.
func (d *Driver) park(id string, q *vm, dir string, moved []string) {
	p := &parked{id: id, v: q, dir: dir, files: map[string]uint64{}, at: time.Now()}
	for _, name := range moved {
		p.files[name] = inode(filepath.Join(dir, name))
	}
	for i, path := range q.vols {
		if path != "" {
			p.vols[i] = inode(path)
		}
	}
	p.anon = anonBytes(q.pid)
	d.mu.Lock()
	if d.parked == nil {
		d.parked = map[string]*parked{}
	}
	d.parked[id] = p
	var held int64
	for _, o := range d.parked {
		held += o.anon
	}
	var out []*parked
	for len(d.parked) > d.maxParked || (len(d.parked) > 0 && held > d.parkBudget) {
		oldest := p
		for _, o := range d.parked {
			if o.at.Before(oldest.at) {
				oldest = o
			}
		}
		delete(d.parked, oldest.id)
		held -= oldest.anon
		out = append(out, oldest)
	}
	d.mu.Unlock()
	// Ended off the hibernation's path, as a hibernated process's end was
	// before parking (a jailed QEMU's end takes tens of milliseconds).
	for _, o := range out {
		d.reaps.Add(1)
		go func() {
			defer d.reaps.Done()
			d.endParked(o, "more parked than allowed")
		}()
	}
}

// endParked ends a parked process; its hibernation directory stays.
func (d *Driver) endParked(p *parked, why string) {
	d.log.Debug("parked vm ended", "vm", p.id, "why", why, "parked_s", int(time.Since(p.at).Seconds()))
	if err := p.v.Kill(context.Background()); err != nil {
		d.log.Warn("end parked vm", "vm", p.id, "err", err)
	}
}

// unpark continues the parked process of the VM snap was hibernated from,
// if there is one and snap is still what it left: its files go back into
// its directory, the network policy is applied, and the guest continues.
// ok is false when there is no such process (then restore as usual).
func (d *Driver) unpark(ctx context.Context, snap vmm.Snapshot, opts vmm.RestoreOptions) (*vm, bool, error) {
	if opts.ID == "" {
		return nil, false, nil
	}
	d.mu.Lock()
	p := d.parked[opts.ID]
	delete(d.parked, opts.ID)
	d.mu.Unlock()
	if p == nil {
		return nil, false, nil
	}
	if why := p.differs(snap); why != "" {
		d.endParked(p, why)
		return nil, false, nil
	}
	v := p.v
	t0 := time.Now()
	if err := v.rename(opts.ID); err != nil {
		d.endParked(p, err.Error())
		return nil, false, nil
	}
	var back []string // files moved back into the VM's directory
	undo := func(err error) (*vm, bool, error) {
		for _, name := range back {
			_ = os.Rename(filepath.Join(v.dir, name), filepath.Join(p.dir, name))
		}
		d.endParked(p, err.Error())
		return nil, false, nil
	}
	for name := range p.files {
		if err := os.Rename(filepath.Join(p.dir, name), filepath.Join(v.dir, name)); err != nil {
			return undo(fmt.Errorf("move %s back: %w", name, err))
		}
		back = append(back, name)
	}
	if d.cfg.Network != nil {
		if err := d.cfg.Network.Apply(ctx, v.id, opts.Network); err != nil {
			return undo(err)
		}
	}
	// cont first: the save left the drives inactive (handed over, as to
	// a migration's destination), and QEMU aborts on a resize of one;
	// cont takes them back. A volume resized meanwhile is announced to
	// the running guest, as a live resize would be.
	if err := v.q.run(ctx, "cont", nil, nil); err != nil {
		return undo(fmt.Errorf("continue: %w", err))
	}
	if err := v.resizeVolumes(ctx); err != nil {
		v.Kill(context.Background())
		return nil, true, fmt.Errorf("resume parked vm %s: %w", v.id, err)
	}
	d.log.Debug("unparked", "vm", v.id, "parked_s", int(time.Since(p.at).Seconds()), "ms", ms(time.Since(t0)))
	return v, true, nil
}

// differs says why snap is not what p's process left (or "").
func (p *parked) differs(snap vmm.Snapshot) string {
	select {
	case <-p.v.exited:
		return "its process ended"
	default:
	}
	if filepath.Dir(snap.StateFile) != p.dir || filepath.Dir(snap.MemFile) != p.dir || filepath.Dir(snap.Disk) != p.dir {
		return "the snapshot is not its hibernation"
	}
	for name, ino := range p.files {
		if ino == 0 || inode(filepath.Join(p.dir, name)) != ino {
			return name + " changed while parked"
		}
	}
	for i := range snap.Volumes {
		f := snap.Volumes[i]
		switch {
		case f.Path == "" && p.v.vols[i] == "" && !p.v.copies[i]:
		case f.Copy && p.v.copies[i] && filepath.Dir(f.Path) == p.dir:
		case !f.Copy && f.Path != "" && f.Path == p.v.vols[i] && inode(f.Path) == p.vols[i]:
		default:
			return fmt.Sprintf("volume slot %d changed while parked", i)
		}
	}
	return ""
}

// parkJanitor ends parked processes past their time or whose hibernation
// went away (a sandbox deleted while hibernated), once a second.
func (d *Driver) parkJanitor(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var out []*parked
		var whys []string
		d.mu.Lock()
		for id, p := range d.parked {
			why := ""
			switch {
			case time.Since(p.at) > d.parkFor:
				why = "parked for long enough"
			case inode(filepath.Join(p.dir, vmm.MemFile)) != p.files[vmm.MemFile]:
				why = "its hibernation is gone"
			}
			if why != "" {
				delete(d.parked, id)
				out, whys = append(out, p), append(whys, why)
			}
		}
		d.mu.Unlock()
		for i, p := range out {
			d.endParked(p, whys[i])
		}
	}
}

// endAllParked ends every parked process (the server stops).
func (d *Driver) endAllParked() {
	d.mu.Lock()
	all := make([]*parked, 0, len(d.parked))
	for _, p := range d.parked {
		all = append(all, p)
	}
	d.parked = nil
	d.mu.Unlock()
	for _, p := range all {
		d.endParked(p, "the server stops")
	}
}

// sweepParked ends the parked processes a crashed server left and removes
// their directories: Recover finds each by its record and, its guest not
// running, ends it.
func (d *Driver) sweepParked() {
	dirs, _ := filepath.Glob(filepath.Join(d.cfg.Dir, parkPrefix+"*"))
	for _, dir := range dirs {
		v, err := d.Recover(context.Background(), filepath.Base(dir))
		if err == nil {
			err = v.Kill(context.Background())
		}
		if err != nil && !errors.Is(err, vmm.ErrGone) {
			d.log.Warn("end a parked vm an earlier server left", "dir", dir, "err", err)
		}
	}
}
