package functions

import (
	"context"
	"log/slog"
	"time"
)

// phases times the parts of one invocation on the server, for the debug
// log ("invocation timing"): where a fresh invocation's time goes is the
// first thing to know before cutting any of it.
type phases struct {
	t0    time.Time
	last  time.Time
	attrs []any
}

func startPhases() *phases {
	now := time.Now()
	return &phases{t0: now, last: now}
}

// mark ends the phase called name: the time since the previous mark.
func (p *phases) mark(name string) {
	now := time.Now()
	p.attrs = append(p.attrs, name+"_ms", ms(now.Sub(p.last)))
	p.last = now
}

// log writes the phases and their total at debug level.
func (p *phases) log(log *slog.Logger, msg string, extra ...any) {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	args := append(append(p.attrs, "total_ms", ms(time.Since(p.t0))), extra...)
	log.Debug(msg, args...)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
