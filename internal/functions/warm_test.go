package functions

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// killRecorder is the one Engine method the warm pool uses (the rest of
// the interface is left nil: calling it would panic).
type killRecorder struct {
	pandastack.Engine
	mu     sync.Mutex
	killed []string
}

func (k *killRecorder) Kill(_ context.Context, id string, _ pandastack.SandboxState) error {
	k.mu.Lock()
	k.killed = append(k.killed, id)
	k.mu.Unlock()
	return nil
}

// Warm VMs are reused only for the version they were restored from, at
// most max are kept idle, ones near the end of their life go, and a new
// version or a delete drains the pool.
func TestWarmPool(t *testing.T) {
	eng := &killRecorder{}
	s := New(Config{Engine: eng})
	ctx := context.Background()
	far := time.Now().Add(warmTTL)
	if id := s.takeWarm(ctx, "fn_1", "snap_a", time.Second); id != "" {
		t.Fatalf("an empty pool handed out %s", id)
	}
	if !s.putWarm("fn_1", "snap_a", "sbx_1", far, 2) || !s.putWarm("fn_1", "snap_a", "sbx_2", far, 2) {
		t.Fatal("pool refused VMs under its limit")
	}
	if s.putWarm("fn_1", "snap_a", "sbx_3", far, 2) {
		t.Fatal("pool kept more than max idle VMs")
	}
	if id := s.takeWarm(ctx, "fn_1", "snap_b", time.Second); id != "" {
		t.Fatalf("a VM of another version was handed out: %s", id)
	}
	if id := s.takeWarm(ctx, "fn_1", "snap_a", time.Second); id != "sbx_2" {
		t.Fatalf("take = %q, want sbx_2", id)
	}
	// One that would outlive its TTL within the timeout is killed, not reused.
	s.putWarm("fn_1", "snap_a", "sbx_old", time.Now().Add(30*time.Second), 3)
	if id := s.takeWarm(ctx, "fn_1", "snap_a", time.Second); id != "sbx_1" {
		t.Fatalf("take = %q, want sbx_1 (sbx_old is too near its end)", id)
	}
	if !slices.Contains(eng.killed, "sbx_old") {
		t.Fatalf("the stale VM was not killed: %v", eng.killed)
	}
	// A new version drains the old one's VMs and refuses them back.
	s.putWarm("fn_1", "snap_a", "sbx_4", far, 3)
	s.drainWarm(ctx, "fn_1", "snap_b")
	if !slices.Contains(eng.killed, "sbx_4") || s.putWarm("fn_1", "snap_a", "sbx_5", far, 3) {
		t.Fatalf("after a new version: killed %v", eng.killed)
	}
	s.putWarm("fn_1", "snap_b", "sbx_6", far, 3)
	s.drainWarm(ctx, "fn_1", "")
	if !slices.Contains(eng.killed, "sbx_6") || s.putWarm("fn_1", "snap_b", "sbx_7", far, 3) {
		t.Fatalf("after a delete: killed %v", eng.killed)
	}
}
