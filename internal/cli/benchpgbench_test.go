package cli

import "testing"

// TestMedianRatio: the ratio is taken round by round (a round's runs share
// the host's load) and its median reported; rounds with no yardstick are
// left out.
func TestMedianRatio(t *testing.T) {
	// Load changed between rounds: the per-round ratios are 0.9, 1.0
	// and 0.8.
	if got := medianRatio([]float64{36, 40, 160}, []float64{40, 40, 200}); got != 0.9 {
		t.Fatalf("median ratio %v, want 0.9", got)
	}
	if got := medianRatio([]float64{10}, []float64{0}); got != 0 {
		t.Fatalf("no yardstick: %v, want 0", got)
	}
}

// TestRatioQuartiles: the spread of the rounds' ratios, rounds without a
// yardstick left out; none at all reports nothing.
func TestRatioQuartiles(t *testing.T) {
	// Ratios 0.5, 1, 0.25, 0.75 (and a round with no yardstick).
	got := ratioQuartiles([]float64{50, 100, 25, 75, 9}, []float64{100, 100, 100, 100, 0})
	if len(got) != 2 || got[0] != 0.25 || got[1] != 0.75 {
		t.Fatalf("quartiles %v, want [0.25 0.75]", got)
	}
	if got := ratioQuartiles([]float64{1}, []float64{0}); got != nil {
		t.Fatalf("no yardstick: %v, want nil", got)
	}
}
