package hostagent

import (
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// stubVM stands in for a running VM; idleLocked only asks whether there is one.
type stubVM struct{ vmm.VM }

func TestIdle(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name  string
		after int // auto_hibernate_seconds
		state pandastack.SandboxState
		vm    bool
		busy  int
		idle  time.Duration // since last use
		want  bool
	}{
		{"Off", 0, pandastack.StateRunning, true, 0, time.Hour, false},
		{"IdleLongEnough", 30, pandastack.StateRunning, true, 0, 30 * time.Second, true},
		{"UsedRecently", 30, pandastack.StateRunning, true, 0, 29 * time.Second, false},
		{"ForegroundExecInFlight", 30, pandastack.StateRunning, true, 1, time.Hour, false},
		{"AlreadyHibernated", 30, pandastack.StateHibernated, false, 0, time.Hour, false},
		{"NoVM", 30, pandastack.StateRunning, false, 0, time.Hour, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &sandbox{rec: hostapi.Machine{State: c.state, AutoHibernateSeconds: c.after}, busy: c.busy, lastUsed: now.Add(-c.idle)}
			if c.vm {
				s.vm = stubVM{}
			}
			if got := s.idleLocked(now); got != c.want {
				t.Errorf("idle = %v, want %v", got, c.want)
			}
		})
	}
}

func TestHoldKeepsBusyUntilReleased(t *testing.T) {
	s := &sandbox{rec: hostapi.Machine{State: pandastack.StateRunning, AutoHibernateSeconds: 1}, vm: stubVM{}}
	release := s.hold()
	later := time.Now().Add(time.Hour)
	if s.idleLocked(later) {
		t.Fatal("idle while a call holds it")
	}
	release()
	release() // a second release is a no-op
	if s.busy != 0 {
		t.Fatalf("busy = %d after release, want 0", s.busy)
	}
	if !s.idleLocked(later) {
		t.Fatal("not idle an hour after the call ended")
	}
}
