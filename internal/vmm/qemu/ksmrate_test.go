package qemu

import "testing"

func TestScanRateFollowsTheVMs(t *testing.T) {
	for _, c := range []struct{ vms, want int }{{0, 100}, {10, 100}, {25, 100}, {50, 200}, {150, 600}, {200, 800}, {400, 1000}} {
		if got := scanRate(c.vms); got != c.want {
			t.Errorf("scanRate(%d) = %d, want %d", c.vms, got, c.want)
		}
	}
}
