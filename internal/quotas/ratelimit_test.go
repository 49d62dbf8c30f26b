package quotas

import (
	"testing"
	"time"
)

func TestRateLimiter(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rl := NewRateLimiter()
	rl.now = func() time.Time { return clock }
	l := Limits{RequestsPerSecond: 2, Burst: 3}

	for i := range 3 {
		if ok, _ := rl.Allow("key_a", l); !ok {
			t.Fatalf("request %d of a burst of 3 refused", i+1)
		}
	}
	ok, wait := rl.Allow("key_a", l)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th request: ok=%v retry after %v; want refused, 500ms (2/s)", ok, wait)
	}
	// A refused request takes no token: after the wait one passes.
	clock = clock.Add(500 * time.Millisecond)
	if ok, _ := rl.Allow("key_a", l); !ok {
		t.Fatal("refused after waiting the retry-after")
	}
	// Keys have buckets of their own.
	if ok, _ := rl.Allow("key_b", l); !ok {
		t.Fatal("another key was refused")
	}
	// No limit.
	for range 1000 {
		if ok, _ := rl.Allow("key_c", Limits{}); !ok {
			t.Fatal("refused with requests_per_second 0 (no limit)")
		}
	}
	// A lowered limit applies at once.
	clock = clock.Add(10 * time.Second)
	slow := Limits{RequestsPerSecond: 0.1, Burst: 1}
	if ok, _ := rl.Allow("key_a", slow); !ok {
		t.Fatal("first request under the new limit refused")
	}
	if ok, wait := rl.Allow("key_a", slow); ok || wait != 10*time.Second {
		t.Fatalf("second request under 0.1/s: ok=%v retry after %v; want refused, 10s", ok, wait)
	}
	// Forget (a revoked key) and idle buckets are dropped.
	rl.Forget("key_a")
	clock = clock.Add(time.Hour)
	rl.Allow("key_d", l)
	if n := len(rl.keys); n != 1 {
		t.Fatalf("%d buckets kept after an idle hour, want 1 (key_d)", n)
	}
}
