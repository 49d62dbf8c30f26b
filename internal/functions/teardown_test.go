package functions

import (
	"bufio"
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// The stand-ins below are the parts of the store, the sandboxes service
// and the engine an invocation uses; what the invocation path does with
// real microVMs is TestFunctions' (internal/e2e).

// oneFunction is a store holding one function; the rest of the interface
// is left nil (calling it would panic).
type oneFunction struct {
	Store
	f Function
}

func (s *oneFunction) GetFunction(_ context.Context, _, name string) (Function, error) {
	if name != s.f.Name {
		return Function{}, pandastack.Errorf(pandastack.ENotFound, "function %s not found", name)
	}
	return s.f, nil
}

func (s *oneFunction) PutInvocation(context.Context, Invocation) error { return nil }

// vmStarter hands out sandbox ids sbx_1, sbx_2, ...
type vmStarter struct {
	mu sync.Mutex
	n  int
}

func (v *vmStarter) Create(context.Context, string, sandboxes.CreateParams) (pandastack.Sandbox, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n++
	return pandastack.Sandbox{ID: "sbx_" + string(rune('0'+v.n))}, nil
}

// shimEngine answers every invocation like the shim does, and holds each
// kill until release is closed.
type shimEngine struct {
	pandastack.Engine
	release chan struct{}
	mu      sync.Mutex
	killed  []string
}

func (e *shimEngine) Guest(context.Context, string) (pandastack.Guest, error) {
	return shimGuest{}, nil
}

func (e *shimEngine) Kill(_ context.Context, id string, _ pandastack.SandboxState) error {
	<-e.release
	e.mu.Lock()
	e.killed = append(e.killed, id)
	e.mu.Unlock()
	return nil
}

func (e *shimEngine) kills() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.killed)
}

type shimGuest struct{ pandastack.Guest }

func (shimGuest) DialPort(context.Context, int) (net.Conn, error) {
	host, guest := net.Pipe()
	go func() {
		defer guest.Close()
		if _, err := bufio.NewReader(guest).ReadString('\n'); err == nil {
			guest.Write([]byte(`{"ok":true,"result":{"hello":"world"},"logs":""}` + "\n"))
		}
	}()
	return host, nil
}

func freshFunction(snapshot string) Function {
	return Function{ID: "fn_1", Name: "hello", LatestVersion: 1, Latest: Version{Isolation: IsolationFresh,
		Timeout: time.Minute, MaxConcurrency: 5, SnapshotID: snapshot}}
}

// A fresh invocation answers once the handler's reply is read: the kill of
// its microVM comes after, and Wait waits for it. (Were the kill back on
// the answer's path, Invoke would block here on the held kill.)
func TestFreshInvocationAnswersBeforeItsVMIsKilled(t *testing.T) {
	eng := &shimEngine{release: make(chan struct{})}
	s := New(Config{Store: &oneFunction{f: freshFunction("snap_a")}, Sandboxes: &vmStarter{}, Engine: eng})
	done := make(chan Invocation, 1)
	go func() {
		inv, err := s.Invoke(context.Background(), "team_1", "hello", []byte(`{}`), InvokeOptions{})
		if err != nil {
			t.Error(err)
		}
		done <- inv
	}()
	select {
	case inv := <-done:
		if inv.Status != StatusSucceeded || !strings.Contains(string(inv.Result), "world") {
			t.Fatalf("invocation: %+v", inv)
		}
	case <-time.After(30 * time.Second):
		close(eng.release)
		t.Fatal("the invocation did not answer while its VM's kill was held")
	}
	if k := eng.kills(); len(k) != 0 {
		t.Fatalf("killed before the kill was released: %v", k)
	}
	waited := make(chan struct{})
	go func() { s.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while a VM's kill was still running")
	case <-time.After(100 * time.Millisecond):
	}
	close(eng.release)
	<-waited
	if k := eng.kills(); !slices.Equal(k, []string{"sbx_1"}) {
		t.Fatalf("killed %v, want [sbx_1]: every fresh VM ends", k)
	}
}

// prewarmCalls records Config.Prewarm's calls as "snapshot=n".
type prewarmCalls struct {
	mu    sync.Mutex
	calls []string
}

func (p *prewarmCalls) prewarm(_ context.Context, id string, n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, id+"="+string(rune('0'+n)))
	return nil
}

func (p *prewarmCalls) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.calls
	p.calls = nil
	return c
}

// A fresh invocation keeps processes prepared for its version's snapshot;
// a version already prepared is not asked for again; another version of
// the same function replaces it; past PrewarmVersions the least recently
// used version's go; a delete drops the function's.
func TestPrewarmKeepsTheRecentVersions(t *testing.T) {
	p := &prewarmCalls{}
	eng := &shimEngine{release: make(chan struct{})}
	close(eng.release)
	store := &oneFunction{f: freshFunction("snap_a")}
	s := New(Config{Store: store, Sandboxes: &vmStarter{}, Engine: eng, Prewarm: p.prewarm, PrewarmSize: 2, PrewarmVersions: 2})
	ctx := context.Background()
	invoke := func() {
		t.Helper()
		if _, err := s.Invoke(ctx, "team_1", "hello", []byte(`{}`), InvokeOptions{}); err != nil {
			t.Fatal(err)
		}
		s.Wait()
	}
	invoke()
	if c := p.take(); !slices.Equal(c, []string{"snap_a=2"}) {
		t.Fatalf("after a first invocation: %v", c)
	}
	invoke()
	if c := p.take(); len(c) != 0 {
		t.Fatalf("a prepared version was asked for again: %v", c)
	}
	store.f = freshFunction("snap_b") // a new version
	invoke()
	if c := p.take(); !slices.Equal(c, []string{"snap_a=0", "snap_b=2"}) {
		t.Fatalf("after a new version: %v", c)
	}
	s.prewarm(ctx, "fn_2", "snap_c")
	s.prewarm(ctx, "fn_3", "snap_d")
	if c := p.take(); !slices.Equal(c, []string{"snap_c=2", "snap_b=0", "snap_d=2"}) {
		t.Fatalf("past PrewarmVersions: %v", c)
	}
	s.unprewarm(ctx, "fn_3")
	if c := p.take(); !slices.Equal(c, []string{"snap_d=0"}) {
		t.Fatalf("after a delete: %v", c)
	}
}

// An invocation that ends after its function was deleted prepares nothing
// for the deleted version's snapshot.
func TestNoPrewarmForADeletedFunction(t *testing.T) {
	p := &prewarmCalls{}
	eng := &shimEngine{release: make(chan struct{})}
	s := New(Config{Store: &oneFunction{f: freshFunction("snap_a")}, Sandboxes: &vmStarter{}, Engine: eng, Prewarm: p.prewarm, PrewarmSize: 2})
	ctx := context.Background()
	if _, err := s.Invoke(ctx, "team_1", "hello", []byte(`{}`), InvokeOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its VM's kill is held; the function is deleted meanwhile (what
	// Delete does to the service's state).
	s.closeGate("fn_1")
	s.unprewarm(ctx, "fn_1")
	close(eng.release)
	s.Wait()
	if c := p.take(); len(c) != 0 {
		t.Fatalf("prepared for a deleted function: %v", c)
	}
}
