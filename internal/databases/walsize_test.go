package databases

import "testing"

// TestWALBudget: WAL is held to an eighth of the volume in whole
// segments, never under PostgreSQL's two-segment floor or over its
// default.
func TestWALBudget(t *testing.T) {
	for size, want := range map[int]int{128: 32, 256: 32, 512: 64, 1024: 128, 2000: 240, 8192: 1024, 65536: 1024} {
		if got := walBudgetMB(size); got != want {
			t.Errorf("volume %d MiB: %d MB of WAL, want %d", size, got, want)
		}
	}
}
