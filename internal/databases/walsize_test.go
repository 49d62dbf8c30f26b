package databases

import "testing"

// TestWALBudget: WAL is held to a sixteenth of the volume in whole
// segments, never under PostgreSQL's two-segment floor or over its
// default.
func TestWALBudget(t *testing.T) {
	for size, want := range map[int]int{0: 32, 128: 32, 256: 32, 512: 32, 1024: 64, 2000: 112, 8192: 512, 16384: 1024, 65536: 1024} {
		if got := walBudgetMB(size); got != want {
			t.Errorf("volume %d MiB: %d MB of WAL, want %d", size, got, want)
		}
	}
}
