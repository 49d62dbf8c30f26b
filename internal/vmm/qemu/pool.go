package qemu

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// pool keeps QEMU processes ready for one snapshot (a template): each has
// its RAM and disk files already cloned from it and its RAM read into the
// page cache, so a restore of that snapshot only loads device state. A
// restore of another snapshot of the same shape (machine and disk size) may
// take one too and clone its own files over them.
type pool struct {
	snap     vmm.Snapshot
	shape    string // machineKey
	diskSize int64
	target   int
	mu       sync.Mutex
	ready    []*vm
	filling  bool
	dropped  bool // by dropPool: a refill keeps nothing
}

// Prewarm keeps n prepared processes for snap. A lower n than before kills
// the ready processes above it; 0 drops the pool (snap's files may be gone
// by then: only its Key is read).
func (d *Driver) Prewarm(snap vmm.Snapshot, n int) {
	if n <= 0 {
		d.dropPool(snap.Key)
		return
	}
	st, err := os.Stat(snap.Disk)
	if err != nil {
		d.log.Warn("prewarm: no disk", "snapshot", snap.Key, "err", err)
		return
	}
	d.mu.Lock()
	p := d.pools[snap.Key]
	if p == nil {
		p = &pool{snap: snap, shape: machineKey(snap.Machine, st.Size()), diskSize: st.Size()}
		d.pools[snap.Key] = p
	}
	d.mu.Unlock()
	p.mu.Lock()
	p.target = n
	var extra []*vm
	if len(p.ready) > n {
		extra = append(extra, p.ready[n:]...)
		p.ready = p.ready[:n:n]
	}
	p.mu.Unlock()
	for _, v := range extra {
		v.Kill(context.Background())
	}
	d.fill(p)
}

// dropPool forgets snapshot key's pool and kills what it has ready; a
// refill under way ends after the process it is preparing, which it kills.
func (d *Driver) dropPool(key string) {
	d.mu.Lock()
	p := d.pools[key]
	delete(d.pools, key)
	d.mu.Unlock()
	if p == nil {
		return
	}
	p.mu.Lock()
	p.target, p.dropped = 0, true
	ready := p.ready
	p.ready = nil
	p.mu.Unlock()
	for _, v := range ready {
		v.Kill(context.Background())
	}
}

// take hands out a prepared process for snap: one preloaded with it if
// ready, else one of the same shape, else nil.
func (d *Driver) take(snap vmm.Snapshot, diskSize int64) *vm {
	shape := machineKey(snap.Machine, diskSize)
	d.mu.Lock()
	cands := []*pool{}
	if p := d.pools[snap.Key]; p != nil && p.shape == shape {
		cands = append(cands, p)
	}
	for _, p := range d.pools {
		if p.shape == shape && p.snap.Key != snap.Key {
			cands = append(cands, p)
		}
	}
	d.mu.Unlock()
	for _, p := range cands {
		if v, left := p.pop(); v != nil {
			if left > 0 {
				d.fillAfter(p, refillPause)
			} else {
				d.fill(p)
			}
			return v
		}
	}
	return nil
}

// refillPause is how long a pool that still has a process ready waits
// before it starts another. Preparing one (starting QEMU, reading a
// template's RAM into the page cache) takes a core for a few hundred
// milliseconds; started at once, it competes with the VM just restored
// while that VM's guest runs its first code. Measured under TCG on 2 cores:
// the child of a fork with 200 MiB dirty answered ~100 ms after its restore
// with the pause, 170–300 ms without. A pool that ran dry refills at once.
const refillPause = 300 * time.Millisecond

// fillAfter calls fill after delay, unless the driver closes first.
func (d *Driver) fillAfter(p *pool, delay time.Duration) {
	d.fills.Add(1)
	go func() {
		defer d.fills.Done()
		select {
		case <-d.ctx.Done():
			return
		case <-time.After(delay):
		}
		d.fill(p)
	}()
}

// pop takes a live process out of the pool, and says how many are left.
func (p *pool) pop() (*vm, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.ready) > 0 {
		v := p.ready[0]
		p.ready = p.ready[1:]
		select {
		case <-v.exited:
			go v.Kill(context.Background())
			continue
		default:
			return v, len(p.ready)
		}
	}
	return nil, 0
}

// fill tops the pool up in the background, one process at a time.
func (d *Driver) fill(p *pool) {
	p.mu.Lock()
	if p.filling || len(p.ready) >= p.target {
		p.mu.Unlock()
		return
	}
	p.filling = true
	p.mu.Unlock()
	d.fills.Add(1)
	go func() {
		defer d.fills.Done()
		failures := 0
		for {
			p.mu.Lock()
			if len(p.ready) >= p.target || d.ctx.Err() != nil {
				p.filling = false
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			ctx, cancel := context.WithTimeout(d.ctx, waitTimeout)
			v, err := d.prepare(ctx, "", p.snap.Machine, p.diskSize, &p.snap, [vmm.VolumeSlots]vmm.VolumeFile{})
			cancel()
			if err != nil {
				failures++
				d.log.Warn("pool refill failed", "snapshot", p.snap.Key, "err", err)
				if failures > 5 {
					p.mu.Lock()
					p.filling = false
					p.mu.Unlock()
					return
				}
				time.Sleep(time.Duration(failures) * 200 * time.Millisecond)
				continue
			}
			failures = 0
			if d.cfg.Accel == pandastack.AccelTCG {
				if err := v.prefaultCode(); err != nil {
					d.log.Debug("pool refill: code buffer not prefaulted", "snapshot", p.snap.Key, "err", err)
				}
			}
			p.mu.Lock()
			if d.ctx.Err() != nil || p.dropped {
				p.mu.Unlock()
				v.Kill(context.Background())
				continue
			}
			p.ready = append(p.ready, v)
			p.mu.Unlock()
		}
	}()
}
