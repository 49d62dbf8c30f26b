package functions

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// recordingStore is oneFunction that keeps each invocation's last record.
type recordingStore struct {
	oneFunction
	mu   sync.Mutex
	invs map[string]Invocation
}

func (s *recordingStore) PutInvocation(_ context.Context, inv Invocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.invs == nil {
		s.invs = map[string]Invocation{}
	}
	s.invs[inv.ID] = inv
	return nil
}

func (s *recordingStore) get(id string) Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.invs[id]
}

// silentEngine is shimEngine whose shim takes the event and never
// answers; dialled counts the calls that reached it.
type silentEngine struct {
	shimEngine
	dialled chan struct{}
}

func (e *silentEngine) Guest(context.Context, string) (pandastack.Guest, error) {
	return silentGuest{dialled: e.dialled}, nil
}

type silentGuest struct {
	pandastack.Guest
	dialled chan struct{}
}

func (g silentGuest) DialPort(context.Context, int) (net.Conn, error) {
	host, guest := net.Pipe()
	go func() {
		buf := make([]byte, 4096)
		_, _ = guest.Read(buf)
		g.dialled <- struct{}{}
		_, _ = guest.Read(buf) // until the host closes its end
		guest.Close()
	}()
	return host, nil
}

// Close ends the invocations in flight, a synchronous and an
// asynchronous one, both waiting on a handler that never returns: each is
// recorded as ended by the stop, its VM killed, and Close returns once
// they are done, well before the function's timeout. An invocation after
// Close does not start a VM.
func TestCloseEndsTheInvocationsInFlight(t *testing.T) {
	eng := &silentEngine{shimEngine: shimEngine{release: make(chan struct{})}, dialled: make(chan struct{}, 2)}
	close(eng.release) // kills go through at once
	f := freshFunction("snap_a")
	f.Latest.Timeout = time.Hour
	st := &recordingStore{oneFunction: oneFunction{f: f}}
	vms := &vmStarter{}
	s := New(Config{Store: st, Sandboxes: vms, Engine: eng})
	async, err := s.Invoke(context.Background(), "team_1", "hello", []byte(`{}`), InvokeOptions{Async: true})
	if err != nil {
		t.Fatal(err)
	}
	syncInv := make(chan Invocation, 1)
	go func() {
		inv, err := s.Invoke(context.Background(), "team_1", "hello", []byte(`{}`), InvokeOptions{})
		if err != nil {
			t.Error(err)
		}
		syncInv <- inv
	}()
	for range 2 {
		select {
		case <-eng.dialled:
		case <-time.After(30 * time.Second):
			t.Fatal("the invocations did not reach their handlers")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var inv Invocation
	select {
	case inv = <-syncInv:
	case <-ctx.Done():
		t.Fatal("the synchronous invocation did not end at Close")
	}
	for _, got := range []Invocation{inv, st.get(async.ID)} {
		if got.Status != StatusError || got.Error == nil || got.Error.Type != "ServerStopped" || got.EndedAt == nil {
			t.Fatalf("an invocation in flight at Close was recorded %+v (error %+v), want an error ServerStopped", got, got.Error)
		}
	}
	if k := eng.kills(); len(k) != 2 || !slices.Contains(k, "sbx_1") || !slices.Contains(k, "sbx_2") {
		t.Fatalf("VMs killed at Close: %v, want both", k)
	}
	late, err := s.Invoke(context.Background(), "team_1", "hello", []byte(`{}`), InvokeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if late.Status != StatusError || late.Error == nil || late.Error.Type != "ServerStopped" || vms.n != 2 {
		t.Fatalf("an invocation after Close: %+v (error %+v), %d VMs started, want ServerStopped and no VM", late, late.Error, vms.n)
	}
}
