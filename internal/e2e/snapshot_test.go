package e2e

import (
	"context"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func TestSnapshots(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "snapshots")
	src := newSandbox(t, c, sdk.CreateSandboxParams{})
	pid, v := startMemProcess(t, src)
	if _, err := src.Files().Write(ctx, "/root/data.txt", []byte("snapshotted")); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	sn, err := src.Snapshot(ctx, "checkpoint-1")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot took %v (%d bytes)", time.Since(t0), sn.SizeBytes)
	if sn.Name != "checkpoint-1" || sn.SandboxID != src.ID || sn.SizeBytes == 0 {
		t.Fatalf("snapshot %+v", sn)
	}
	if _, err := src.Snapshot(ctx, "checkpoint-1"); !sdk.IsConflict(err) {
		t.Fatalf("a second snapshot with the same name: %v", err)
	}
	// The source runs on and changes; the snapshot does not.
	if _, err := src.Files().Write(ctx, "/root/data.txt", []byte("changed later")); err != nil {
		t.Fatal(err)
	}
	// Any number of sandboxes start from it, each with the saved memory and disk.
	for i := 0; i < 2; i++ {
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID, TTLSeconds: 300})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("create from snapshot took %v", time.Since(t0))
		t.Cleanup(func() { _ = sb.Kill(context.Background()) })
		if b, _ := sb.Files().Read(ctx, "/root/data.txt"); string(b) != "snapshotted" {
			t.Fatalf("restore %d: disk %q", i, b)
		}
		if got := memValue(t, sb, pid); got != v {
			t.Fatalf("restore %d: process memory %q, want %s", i, got, v)
		}
	}
	list, err := c.ListSnapshots(ctx)
	if err != nil || len(list) != 1 || list[0].ID != sn.ID {
		t.Fatalf("list: %v %+v", err, list)
	}
	// Another team neither sees nor uses it.
	other := teamClient(t, "snapshots-other")
	if l, _ := other.ListSnapshots(ctx); len(l) != 0 {
		t.Fatalf("another team lists %d snapshots", len(l))
	}
	if _, err := other.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID}); !sdk.IsNotFound(err) {
		t.Fatalf("another team created from the snapshot: %v", err)
	}
	if err := other.DeleteSnapshot(ctx, sn.ID); !sdk.IsNotFound(err) {
		t.Fatalf("another team deleted the snapshot: %v", err)
	}
	// Deleted, it is gone for good; sandboxes made from it live on.
	if err := c.DeleteSnapshot(ctx, sn.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID}); !sdk.IsNotFound(err) {
		t.Fatalf("create from a deleted snapshot: %v", err)
	}
	if _, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: "snap_nope"}); !sdk.IsNotFound(err) {
		t.Fatalf("create from an unknown snapshot: %v", err)
	}
}
