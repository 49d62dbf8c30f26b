package hostagent

import (
	"context"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// sizedTemplates is fixedTemplates with size variants: the same files
// under a key of the size's own.
type sizedTemplates struct{ fixedTemplates }

func (s sizedTemplates) SizedSnapshot(ctx context.Context, ref string, cpus, memMiB, diskGiB int) (vmm.Snapshot, pandastack.Template, error) {
	snap, t, err := s.Snapshot(ctx, ref)
	snap.Key += "-variant"
	snap.Machine.MemoryMiB, t.MemoryMiB = memMiB, memMiB
	return snap, t, err
}

// A create at the template's own size keeps its pool filled; one at
// another size does not start a pool for that size (any team could
// otherwise keep idle QEMUs running for every size it asks for once).
func TestNoPoolsForSizeVariants(t *testing.T) {
	h := newTestHost(t)
	snap, _, _ := h.cfg.Templates.Snapshot(context.Background(), testTemplate)
	h.cfg.Templates = sizedTemplates{fixedTemplates{snap: snap}}
	h.cfg.PoolSize = 2
	h.restart()
	h.create(pandastack.CreateRequest{})
	if n := h.drv.PoolTarget(snap.Key); n != 2 {
		t.Fatalf("pool of the template = %d, want 2", n)
	}
	h.create(pandastack.CreateRequest{MemoryMiB: 96})
	if n := h.drv.PoolTarget(snap.Key + "-variant"); n != 0 {
		t.Fatalf("a create at another size started a pool of %d for it", n)
	}
}
