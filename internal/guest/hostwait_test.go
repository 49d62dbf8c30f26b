package guest

import (
	"testing"
	"time"
)

// A disconnect is polled every 2 ms for hostSpins reads, then with pauses
// doubling up to hostWaitMax; a frame from a host starts the pace over.
func TestHostWaitPace(t *testing.T) {
	h := newHostWait()
	var got []time.Duration
	h.sleep = func(d time.Duration) { got = append(got, d) }
	pace := func(n int) {
		got = got[:0]
		for range n {
			h.wait()
		}
	}
	pace(hostSpins)
	for i, d := range got {
		if d != 2*time.Millisecond {
			t.Fatalf("pause %d of a new disconnect: %v, want 2ms", i, d)
		}
	}
	pace(8)
	want := []time.Duration{4, 8, 16, 32, 64, 100, 100, 100}
	for i, d := range got {
		if d != want[i]*time.Millisecond {
			t.Fatalf("pauses after the first %d: %v, want %v ms", hostSpins, got, want)
		}
	}
	h.connected()
	pace(1)
	if got[0] != 2*time.Millisecond {
		t.Fatalf("after a host's frame, the next disconnect paused %v, want 2ms", got[0])
	}
}
