package pandastack

import (
	"crypto/rand"
	"encoding/hex"
)

// NewID returns prefix followed by 20 random hex digits (80 bits): the
// shape of every record id the platform mints ("sbx_…", "app_…", "db-…").
func NewID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
