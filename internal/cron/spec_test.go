package cron

import (
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestParseNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		expr, tz, field string // field "" : valid
	}{
		{"*/5 * * * *", "", ""},
		{"*/2 * * * * *", "UTC", ""},
		{"@every 10s", "Europe/Paris", ""},
		{"@daily", "America/New_York", ""},
		{"@at 2030-01-01T00:00:00Z", "", ""},
		{"@at 2030-01-01T09:00:00", "Asia/Tokyo", ""},
		{"61 * * * *", "", "schedule"},
		{"* * *", "", "schedule"},
		{"", "", "schedule"},
		{"@every 10ms", "", "schedule"},
		{"CRON_TZ=UTC * * * * *", "", "schedule"},
		{"@at tomorrow", "", "schedule"},
		{"* * * * *", "Mars/Olympus", "tz"},
		{"* * * * *", "Local", "tz"},
	} {
		_, err := Parse(tc.expr, tc.tz)
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("Parse(%q, %q): %v", tc.expr, tc.tz, err)
		case tc.field != "" && (pandastack.ErrorCode(err) != pandastack.EInvalid || !strings.HasPrefix(pandastack.ErrorMessage(err), tc.field)):
			t.Errorf("Parse(%q, %q) = %v; want invalid naming %s", tc.expr, tc.tz, err, tc.field)
		}
	}
}

// next lists n occurrences after from.
func next(t *testing.T, expr, tz, from string, n int) []time.Time {
	t.Helper()
	s, err := Parse(expr, tz)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	at := mustTime(t, from)
	for range n {
		at = s.Next(at)
		out = append(out, at)
	}
	return out
}

func TestNextAcrossDST(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	wall := func(ts []time.Time) []string {
		var out []string
		for _, x := range ts {
			out = append(out, x.In(ny).Format("01-02 15:04 MST"))
		}
		return out
	}
	for _, tc := range []struct {
		name, expr, from string
		want             []string
	}{
		{"a daily time keeps its wall-clock time when clocks spring forward", "0 9 * * *", "2026-03-07T00:00:00Z",
			[]string{"03-07 09:00 EST", "03-08 09:00 EDT", "03-09 09:00 EDT"}},
		{"a time in the skipped hour does not fire that day", "30 2 * * *", "2026-03-07T00:00:00Z",
			[]string{"03-07 02:30 EST", "03-09 02:30 EDT"}},
		{"a time in the repeated hour fires once when clocks fall back", "30 1 * * *", "2026-10-31T00:00:00Z",
			[]string{"10-31 01:30 EDT", "11-01 01:30 EDT", "11-02 01:30 EST"}},
		{"an every-hour schedule fires at each real occurrence of the repeated hour", "*/30 * * * *", "2026-11-01T04:50:00Z",
			[]string{"11-01 01:00 EDT", "11-01 01:30 EDT", "11-01 01:00 EST", "11-01 01:30 EST", "11-01 02:00 EST"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := wall(next(t, tc.expr, "America/New_York", tc.from, len(tc.want)))
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
	// Occurrences are UTC and strictly increasing across both changes.
	ts := next(t, "0 */3 * * *", "Europe/Paris", "2026-03-27T00:00:00Z", 300)
	for i := 1; i < len(ts); i++ {
		if !ts[i].After(ts[i-1]) || ts[i].Location() != time.UTC {
			t.Fatalf("occurrence %d %v after %v", i, ts[i], ts[i-1])
		}
	}
}

func TestOneShotFiresOnce(t *testing.T) {
	s, err := Parse("@at 2030-01-01T09:00:00", "Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	at := s.Next(mustTime(t, "2029-12-31T00:00:00Z"))
	if !at.Equal(mustTime(t, "2030-01-01T00:00:00Z")) {
		t.Fatalf("one-shot at %v, want 09:00 Tokyo = 00:00 UTC", at)
	}
	if n := s.Next(at); !n.IsZero() {
		t.Fatalf("one-shot fires again at %v", n)
	}
}

func TestPlanMissedRuns(t *testing.T) {
	spec, _ := Parse("* * * * *", "UTC")
	due := mustTime(t, "2026-01-01T10:00:00Z")
	sc := Schedule{ID: "cron_1", NextFireAt: &due, Missed: MissedSkip}

	runs, nxt := Plan(sc, spec, due.Add(2*time.Second), 5*time.Second)
	if len(runs) != 1 || runs[0].Status != RunPending || !runs[0].FireAt.Equal(due) || !nxt.Equal(due.Add(time.Minute)) {
		t.Fatalf("on time: %+v next %v", runs, nxt)
	}
	if runs[0].ID != ExecutionID("cron_1", due) {
		t.Fatalf("execution id %s is not the occurrence's stable id", runs[0].ID)
	}

	now := due.Add(10*time.Minute + 30*time.Second) // down for 10 minutes: 11 occurrences passed
	runs, nxt = Plan(sc, spec, now, 5*time.Second)
	if len(runs) != 1 || runs[0].Status != RunSkipped || !strings.Contains(runs[0].Message, "11 occurrence") || !nxt.Equal(due.Add(11*time.Minute)) {
		t.Fatalf("missed, skip: %+v next %v", runs, nxt)
	}

	sc.Missed = MissedCatchUp
	runs, nxt = Plan(sc, spec, now, 5*time.Second)
	if len(runs) != 1 || runs[0].Status != RunPending || !runs[0].FireAt.Equal(due.Add(10*time.Minute)) || !nxt.Equal(due.Add(11*time.Minute)) {
		t.Fatalf("missed, catch up once: %+v next %v", runs, nxt)
	}

	// After missed runs an @every schedule stays on its grid.
	every, _ := Parse("@every 2s", "UTC")
	sc = Schedule{ID: "cron_2", NextFireAt: &due, Missed: MissedCatchUp}
	runs, nxt = Plan(sc, every, due.Add(9500*time.Millisecond), time.Second)
	if len(runs) != 1 || !runs[0].FireAt.Equal(due.Add(8*time.Second)) || !strings.Contains(runs[0].Message, "5 occurrence") || !nxt.Equal(due.Add(10*time.Second)) {
		t.Fatalf("@every missed: %+v next %v", runs, nxt)
	}
}
