package qemu

import (
	"context"
	"sync"
	"time"

	"github.com/pandastack/pandastack/internal/vmm"
)

// pool keeps QEMU processes for one snapshot ready to load it.
type pool struct {
	snap    vmm.Snapshot
	target  int
	mu      sync.Mutex
	ready   []*vm
	filling bool
}

// Prewarm keeps n prepared processes for snap (0 stops refilling; what is
// ready stays until used or Close).
func (d *Driver) Prewarm(snap vmm.Snapshot, n int) {
	p := d.pool(snap)
	p.mu.Lock()
	p.target = n
	p.mu.Unlock()
	d.fill(p)
}

func (d *Driver) pool(snap vmm.Snapshot) *pool {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pools[snap.Key]
	if p == nil {
		p = &pool{snap: snap}
		d.pools[snap.Key] = p
	}
	return p
}

// take hands out a prepared process, if one is ready and alive.
func (d *Driver) take(snap vmm.Snapshot) *vm {
	p := d.pool(snap)
	defer d.fill(p)
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
			return v
		}
	}
	return nil
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
			v, err := d.prepare(ctx, p.snap)
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
			p.mu.Lock()
			if d.ctx.Err() != nil {
				p.mu.Unlock()
				v.Kill(context.Background())
				continue
			}
			p.ready = append(p.ready, v)
			p.mu.Unlock()
		}
	}()
}
