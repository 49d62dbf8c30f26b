package cron

import (
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"

	"github.com/pandastack/pandastack"
)

// parser takes five fields, or six with seconds first, and descriptors
// (@hourly, @daily, @every 10s, ...).
var parser = robfig.NewParser(robfig.SecondOptional | robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// Spec is a parsed schedule.
type Spec interface {
	// Next is the first occurrence after t, in UTC; the zero time when
	// there is none (a one-shot that passed).
	Next(t time.Time) time.Time
}

// Parse parses expr in time zone tz (IANA name; "" is UTC). Errors are
// EInvalid and name the field at fault: "schedule" or "tz".
func Parse(expr, tz string) (Spec, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || strings.EqualFold(tz, "local") {
		return nil, pandastack.Errorf(pandastack.EInvalid, "tz: %q is not an IANA time zone (e.g. Europe/Paris)", tz)
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, pandastack.Errorf(pandastack.EInvalid, "schedule is required")
	}
	if strings.Contains(expr, "TZ=") {
		return nil, pandastack.Errorf(pandastack.EInvalid, "schedule: give the time zone in tz, not as a TZ= prefix")
	}
	if at, ok := strings.CutPrefix(expr, "@at "); ok {
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(at))
		if err != nil {
			if t, err = time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(at), loc); err != nil {
				return nil, pandastack.Errorf(pandastack.EInvalid, "schedule: @at takes a time like 2026-01-02T15:04:05Z (RFC 3339, or local to tz without the offset): %v", err)
			}
		}
		return oneShot{t.UTC()}, nil
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		if dur, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && dur < time.Second {
			return nil, pandastack.Errorf(pandastack.EInvalid, "schedule: @every must be at least 1s, got %s", dur)
		}
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, pandastack.Errorf(pandastack.EInvalid, "schedule: %q is not a cron expression (5 fields, 6 with seconds first, @every DURATION, @hourly/@daily/..., or @at TIME): %v", expr, err)
	}
	if ss, ok := s.(*robfig.SpecSchedule); ok {
		ss.Location = loc
	}
	return utc{s}, nil
}

// utc is a robfig schedule with the DST rule of classic cron added: when
// clocks fall back, a schedule with fixed hours fires once at a repeated
// wall-clock time, not twice (a schedule with every hour, "*", fires at
// each real occurrence). When clocks spring forward, a wall-clock time
// that does not exist that day does not fire (robfig's rule, as in
// Kubernetes CronJobs).
type utc struct{ s robfig.Schedule }

// starBit marks a field given as "*" in robfig's SpecSchedule bit sets.
const starBit = 1 << 63

func (u utc) Next(t time.Time) time.Time {
	n := u.s.Next(t)
	if ss, ok := u.s.(*robfig.SpecSchedule); ok && ss.Hour&starBit == 0 {
		for i := 0; i < 4 && !n.IsZero() && repeatedWallClock(n, ss.Location); i++ {
			n = u.s.Next(n)
		}
	}
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// repeatedWallClock reports whether t's wall-clock time in loc already
// happened earlier that day (clocks fell back in between).
func repeatedWallClock(t time.Time, loc *time.Location) bool {
	_, off := t.In(loc).Zone()
	_, before := t.Add(-3 * time.Hour).In(loc).Zone()
	if before <= off {
		return false
	}
	a, b := t.In(loc), t.Add(-time.Duration(before-off)*time.Second).In(loc)
	return a.Format(time.DateTime) == b.Format(time.DateTime)
}

type oneShot struct{ at time.Time }

func (o oneShot) Next(t time.Time) time.Time {
	if o.at.After(t) {
		return o.at
	}
	return time.Time{}
}
