package hostagent

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/vmmtest"
)

// heldDriver holds each restore until the test lets it go.
type heldDriver struct {
	*vmmtest.Driver
	entered chan struct{}
	release chan struct{}
}

func (d *heldDriver) Restore(ctx context.Context, snap vmm.Snapshot, opts vmm.RestoreOptions) (vmm.VM, error) {
	d.entered <- struct{}{}
	<-d.release
	return d.Driver.Restore(ctx, snap, opts)
}

// A create still restoring when the host closes, ending every machine, is
// not left running: Close waits for it and ends its VM with the others;
// a create after Close is refused as unavailable.
func TestCloseEndsTheCreateInFlight(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.stop()
	held := &heldDriver{Driver: h.drv, entered: make(chan struct{}), release: make(chan struct{})}
	cfg := h.cfg
	cfg.Driver = held
	a := New(cfg)
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.Settle(context.Background(), hostapi.SettleRequest{}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range a.Events(context.Background()) {
		}
	}()
	spec := hostapi.MachineSpec{ID: "sbx_racing", Template: testTemplate, TTL: time.Hour}
	created := make(chan error, 1)
	go func() {
		_, err := a.Create(context.Background(), spec)
		created <- err
	}()
	<-held.entered
	closed := make(chan error, 1)
	go func() { closed <- a.Close(context.Background(), true) }()
	time.Sleep(200 * time.Millisecond) // Close is under way, the create still restoring
	close(held.release)
	if err := <-created; err != nil {
		t.Fatalf("the create in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	if running := h.drv.Running(); len(running) != 0 {
		t.Fatalf("VMs running after the host closed: %v", running)
	}
	_, err := a.Create(context.Background(), hostapi.MachineSpec{ID: "sbx_late", Template: testTemplate, TTL: time.Hour})
	var perr *pandastack.Error
	if !errors.As(err, &perr) || perr.Code != pandastack.EUnavailable {
		t.Fatalf("a create after close: %v, want unavailable", err)
	}
}
