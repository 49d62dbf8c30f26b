package qemu

// PoolReady is how many processes wait ready in the pool for snapshot key
// (for tests).
func (d *Driver) PoolReady(key string) int {
	d.mu.Lock()
	p := d.pools[key]
	d.mu.Unlock()
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// IsOurQEMU is isOurQEMU (for tests).
var IsOurQEMU = isOurQEMU
