package sqlhttp

import (
	"context"
	"log/slog"
	"time"
)

// timing records where one request's time went, logged at debug level
// ("sql over http timing"): reading and parsing the request, taking a
// session (session: a pooled one, or a new one — dial: reaching the
// database through its route's backend, waking its machine if it sleeps —
// then PostgreSQL's startup and authentication), the queries, and writing
// the answer. A request on a pooled session has dial 0.
type timing struct {
	start                time.Time
	parse, dial, session time.Duration
	query, write         time.Duration
	mark                 time.Time
}

type timingKey struct{}

func newTiming() *timing {
	now := time.Now()
	return &timing{start: now, mark: now}
}

// lap returns the time since the last lap.
func (t *timing) lap() time.Duration {
	now := time.Now()
	d := now.Sub(t.mark)
	t.mark = now
	return d
}

func withTiming(ctx context.Context, t *timing) context.Context {
	return context.WithValue(ctx, timingKey{}, t)
}

// timingOf is ctx's request timing, nil outside a request.
func timingOf(ctx context.Context) *timing {
	t, _ := ctx.Value(timingKey{}).(*timing)
	return t
}

func (t *timing) log(log *slog.Logger, status int) {
	us := func(d time.Duration) int64 { return d.Microseconds() }
	log.Debug("sql over http timing", "status", status, "pooled", t.dial == 0, "parse_us", us(t.parse), "dial_us", us(t.dial),
		"session_us", us(t.session), "query_us", us(t.query), "write_us", us(t.write), "total_us", us(time.Since(t.start)))
}
