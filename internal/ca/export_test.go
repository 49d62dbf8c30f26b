package ca

// MaxLeaves is maxLeaves, for tests.
const MaxLeaves = maxLeaves

// Cached is the number of cached leaf certificates.
func (c *CA) Cached() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.leaves)
}
