package quotas

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter is a token bucket per API key, sized by the key's team's
// RequestsPerSecond and Burst. It is safe for concurrent use.
type RateLimiter struct {
	mu        sync.Mutex
	keys      map[string]*keyBucket
	lastSweep time.Time
	now       func() time.Time // for tests
}

type keyBucket struct {
	lim      *rate.Limiter
	lastUsed time.Time
}

// idleFor is how long a key's bucket is kept unused; after it, the bucket
// is full again anyway, so dropping it changes nothing.
const idleFor = 10 * time.Minute

// NewRateLimiter returns an empty RateLimiter.
func NewRateLimiter() *RateLimiter {
	return &RateLimiter{keys: map[string]*keyBucket{}, now: time.Now}
}

// Allow takes one request from key's bucket under l. When the bucket is
// empty it takes nothing and says how long until a request would pass. A
// RequestsPerSecond of 0 means no limit.
func (rl *RateLimiter) Allow(keyID string, l Limits) (ok bool, retryAfter time.Duration) {
	if l.RequestsPerSecond <= 0 {
		return true, 0
	}
	burst := l.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(l.RequestsPerSecond)))
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	now := rl.now()
	rl.sweep(now)
	b, found := rl.keys[keyID]
	if !found {
		b = &keyBucket{lim: rate.NewLimiter(rate.Limit(l.RequestsPerSecond), burst)}
		rl.keys[keyID] = b
	}
	// Limits an admin changed apply at once, keeping the tokens left.
	if b.lim.Limit() != rate.Limit(l.RequestsPerSecond) {
		b.lim.SetLimitAt(now, rate.Limit(l.RequestsPerSecond))
	}
	if b.lim.Burst() != burst {
		b.lim.SetBurstAt(now, burst)
	}
	b.lastUsed = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Forget drops a key's bucket (a revoked key).
func (rl *RateLimiter) Forget(keyID string) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	delete(rl.keys, keyID)
}

// sweep drops buckets unused for idleFor, at most once a minute.
func (rl *RateLimiter) sweep(now time.Time) {
	if now.Sub(rl.lastSweep) < time.Minute {
		return
	}
	rl.lastSweep = now
	for id, b := range rl.keys {
		if now.Sub(b.lastUsed) > idleFor {
			delete(rl.keys, id)
		}
	}
}
