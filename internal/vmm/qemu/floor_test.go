package qemu_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/vmm"
)

// TestBareRestoresLeaveNothing: bare restores (the bench's floor) run, are
// timed from exec and from the state's load to running, and leave no process, directory or uid.
func TestBareRestoresLeaveNothing(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	each, wall, err := d.BareRestores(context.Background(), s, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(each) != 3 {
		t.Fatalf("%d timings for 3 restores", len(each))
	}
	for _, e := range each {
		if e.FromLoad <= 0 || e.FromLoad > e.FromExec || e.FromExec > wall {
			t.Fatalf("restore took %+v of a %v run", e, wall)
		}
	}
	if n := qemuPIDs(dir); n != 0 {
		t.Fatalf("%d QEMU processes left", n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d VM directories left", len(ents))
	}
	if ps, err := d.Processes(); err != nil || len(ps) != 0 {
		t.Fatalf("processes after the floor: %v, %v", ps, err)
	}
}

// TestBareRestoresUntilTheGuestAnswers: with an answer function, each
// bare restore is timed until its guest agent answered a hello over the
// socket the function is given, and nothing is left after.
func TestBareRestoresUntilTheGuestAnswers(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	var mu sync.Mutex
	answered := 0
	answer := func(ctx context.Context, c, _ net.Conn) error {
		cl, _, err := guestconn.NewConn(c).Handshake(ctx)
		if err != nil {
			return err
		}
		cl.Close()
		mu.Lock()
		answered++
		mu.Unlock()
		return nil
	}
	each, wall, err := d.BareRestores(context.Background(), s, 2, answer)
	if err != nil {
		t.Fatal(err)
	}
	if len(each) != 2 || answered != 2 {
		t.Fatalf("%d timings and %d answers for 2 restores", len(each), answered)
	}
	for _, e := range each {
		if e.FromLoad <= 0 || e.FromLoad > e.FromExec || e.FromExec > wall {
			t.Fatalf("restore took %+v of a %v run", e, wall)
		}
	}
	// A guest that never answers is an error, not a floor.
	_, _, err = d.BareRestores(context.Background(), s, 1, func(ctx context.Context, c, _ net.Conn) error {
		return errors.New("no answer")
	})
	if err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("a failed answer: %v", err)
	}
	if n := qemuPIDs(dir); n != 0 {
		t.Fatalf("%d QEMU processes left", n)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d VM directories left", len(ents))
	}
}

// TestProcessesListsRunningVMs: Processes maps a restored VM's id to its
// QEMU pid (the bench reads each sandbox's PSS and CPU time by it).
func TestProcessesListsRunningVMs(t *testing.T) {
	s := template(t)
	d := newDriver(t, vmDir(t))
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{ID: "sbx_processes"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	ps, err := d.Processes()
	if err != nil || ps["sbx_processes"] != v.PID() {
		t.Fatalf("processes = %v, %v; want sbx_processes → %d", ps, err, v.PID())
	}
}

// TestIdleGuestIsTickless: a restored guest runs on a clocksource that
// can stop its periodic tick when idle (on refined-jiffies it takes 250
// timer interrupts a second and costs the host CPU while doing nothing),
// in the kernel's low-resolution tickless mode: high-resolution timers
// off, so short sleeps in the guest wait for the next tick instead of
// each programming the emulated APIC timer (see KernelCmdline).
func TestIdleGuestIsTickless(t *testing.T) {
	s := template(t)
	d := newDriver(t, vmDir(t))
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	cl := agent(t, v)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out strings.Builder
	_, err = cl.Exec(ctx, pandastack.ExecRequest{Cmd: "cat /sys/devices/system/clocksource/clocksource0/current_clocksource; grep -m1 hres_active /proc/timer_list; grep -m1 nohz_mode /proc/timer_list"},
		nil, func(ev pandastack.ExecEvent) error {
			if ev.Type == "stdout" {
				out.Write(ev.Data)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(out.String()), " ")
	if strings.Contains(got, "jiffies") {
		t.Fatalf("the guest runs on a jiffies clocksource (it cannot stop its tick): %s", got)
	}
	want := []string{".hres_active : 0", ".nohz_mode : 1"} // NOHZ_MODE_LOWRES
	if d.Accel() == pandastack.AccelKVM {
		want = []string{".nohz_mode : 2"} // kvm-clock, high resolution: KVM's timers are cheap
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Fatalf("the guest's timers: %s; want %q (tickless idle, timers on the tick under TCG)", got, w)
		}
	}
}
