package hostagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guest/guesttest"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/vmm"
)

// failingDriver's Checkpoint writes part of a save into dir, as a VMM that
// ran out of space half way might, and fails with err.
type failingDriver struct {
	vmm.Driver
	err error
}

func (d *failingDriver) Checkpoint(ctx context.Context, v vmm.VM, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, vmm.StateFile), []byte("half a state"), 0o600); err != nil {
		return err
	}
	return fmt.Errorf("checkpoint %s: %w", v.ID(), d.err)
}

func (d *failingDriver) Close() error { return nil }

// idVM is a running VM as far as a save is concerned.
type idVM struct{ vmm.VM }

func (idVM) ID() string { return "sbx_save" }

// guestSession is a session with the real guest agent, run on this host.
func guestSession(t *testing.T) *guestconn.Client { return guesttest.Session(t) }

// A save that fails half way — a snapshot, or a fork's checkpoint — leaves
// nothing: no directory (so the sandboxes service records nothing). A full disk answers 507
// insufficient_storage, anything else 503 unavailable.
func TestFailedSaveLeavesNothing(t *testing.T) {
	client := guestSession(t)
	tests := []struct {
		name string
		err  error
		code string
	}{
		{"DiskFull", &os.PathError{Op: "write", Path: "state", Err: syscall.ENOSPC}, pandastack.EInsufficientStorage},
		{"QEMUSaysDiskFull", errors.New("migrate: failed: No space left on device"), pandastack.EInsufficientStorage},
		{"OtherFailure", errors.New("qmp: connection reset"), pandastack.EUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			snapDir := t.TempDir()
			a := New(Config{Driver: &failingDriver{err: tt.err}, SnapshotDir: snapDir, HibernateDir: t.TempDir()})
			rec := hostapi.Machine{ID: "sbx_save", State: pandastack.StateRunning, MemoryMiB: 1,
				CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)}
			a.sbx[rec.ID] = newSandbox(rec, idVM{}, client)

			_, err := a.Snapshot(ctx, hostapi.SnapshotRequest{MachineID: rec.ID, SnapshotID: "snap_half"})
			if got := pandastack.ErrorCode(err); got != tt.code {
				t.Fatalf("snapshot: code %q (%v), want %q", got, err, tt.code)
			}
			if _, err := a.Fork(ctx, hostapi.ForkRequest{ParentID: rec.ID, ChildIDs: []string{"sbx_child"}}); pandastack.ErrorCode(err) != tt.code {
				t.Fatalf("fork: %v, want %q", err, tt.code)
			}
			if ents, _ := os.ReadDir(snapDir); len(ents) != 0 {
				t.Fatalf("left in the snapshot dir: %v", ents)
			}
			// The sandbox is still live and its agent answers.
			if _, err := a.get(ctx, rec.ID); err != nil {
				t.Fatalf("sandbox after the failed save: %v", err)
			}
			if _, err := client.Ping(ctx); err != nil {
				t.Fatalf("agent after the failed save: %v", err)
			}
		})
	}
}
