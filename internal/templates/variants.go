package templates

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// DefaultMaxSizeVariants bounds the size variants kept of one template
// build (Config.MaxSizeVariants). Each costs a cold boot and bake, its RAM
// and disk on the VM filesystem, and a pool of QEMU processes; without a
// bound any team could make one per memory size it asks for.
const DefaultMaxSizeVariants = 8

// maxSizeVariants is the configured bound (0: the default; below 0: none).
func (b *Builder) maxSizeVariants() int {
	switch n := b.cfg.MaxSizeVariants; {
	case n == 0:
		return DefaultMaxSizeVariants
	case n < 0:
		return 0
	default:
		return n
	}
}

// variantsOf lists the baked size variants of build base of template name,
// as "N cpus, M MiB" sizes, sorted as the directory lists them.
func (b *Builder) variantsOf(name, base string) []string {
	ents, err := os.ReadDir(filepath.Join(b.cfg.TemplateDir, name))
	if err != nil {
		return nil
	}
	var sizes []string
	for _, e := range ents {
		if !e.IsDir() || e.Name() == base {
			continue
		}
		dir := b.dir(name, e.Name())
		md, err := readMeta(dir)
		if err != nil || md.BaseID != base {
			continue
		}
		rec, err := readRecord(dir)
		if err != nil {
			continue // a bake that did not finish
		}
		size := fmt.Sprintf("%d cpus, %d MiB", rec.Machine.CPUs, rec.Machine.MemoryMiB)
		if md.DiskGiB != 0 {
			size += fmt.Sprintf(", %d GiB disk", md.DiskGiB)
		}
		sizes = append(sizes, size)
	}
	return sizes
}

// checkVariants refuses a new size variant of build base when it already
// has as many as allowed: quota_exceeded, listing the sizes that exist
// (any create may use one of them).
func (b *Builder) checkVariants(name, base string) error {
	limit := b.maxSizeVariants()
	if limit == 0 {
		return nil
	}
	sizes := b.variantsOf(name, base)
	if len(sizes) < limit {
		return nil
	}
	return pandastack.Errorf(pandastack.EQuota,
		"template %s has %d size variants, the server's limit: create at its own size or one of these (%s)",
		name, len(sizes), strings.Join(sizes, "; "))
}

// takeVariant reports whether variant id of template name is baked and,
// if so, marks it used now; under the variant's lock, so CollectVariants
// either removed it before (and it is baked again) or leaves it alone.
func (b *Builder) takeVariant(name, id string) bool {
	defer b.lock(name + "@" + id)()
	if _, err := os.Stat(filepath.Join(b.dir(name, id), "template.json")); err != nil {
		return false
	}
	b.variantUsed(id)
	return true
}

// variantUsed notes that variant id was just handed out for a create:
// CollectVariants leaves it alone for a while (the create restores from
// its files after SizedSnapshot returns).
func (b *Builder) variantUsed(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.usedAt == nil {
		b.usedAt = map[string]time.Time{}
	}
	b.usedAt[id] = time.Now()
}

// CollectVariants removes the size variants that inUse says nothing uses
// (no live sandbox and no snapshot was made from them) and that were
// neither baked nor handed out for a create within minAge, and returns
// the "name@id" of each it removed. A variant is baked again by the next
// create at its size. Running VMs never map a template's own files (they
// restore from reflink copies), so removing them takes nothing from a VM.
func (b *Builder) CollectVariants(ctx context.Context, inUse func(id string) bool, minAge time.Duration) ([]string, error) {
	names, err := os.ReadDir(b.cfg.TemplateDir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list templates: %w", err)
	}
	var removed []string
	for _, n := range names {
		ids, err := os.ReadDir(filepath.Join(b.cfg.TemplateDir, n.Name()))
		if err != nil || !n.IsDir() {
			continue
		}
		for _, e := range ids {
			if ctx.Err() != nil {
				return removed, ctx.Err()
			}
			name, id := n.Name(), e.Name()
			if ok, err := b.collectVariant(name, id, inUse, minAge); err != nil {
				return removed, err
			} else if ok {
				removed = append(removed, name+"@"+id)
			}
		}
	}
	return removed, nil
}

// collectVariant removes variant id of template name if it may go.
func (b *Builder) collectVariant(name, id string, inUse func(id string) bool, minAge time.Duration) (bool, error) {
	dir := b.dir(name, id)
	md, err := readMeta(dir)
	if err != nil || md.BaseID == "" {
		return false, nil // not a variant
	}
	defer b.lock(name + "@" + id)()
	fi, err := os.Stat(filepath.Join(dir, "template.json"))
	if err != nil || time.Since(fi.ModTime()) < minAge {
		return false, nil // baking, or baked a moment ago
	}
	b.mu.Lock()
	used := b.usedAt[id]
	b.mu.Unlock()
	if time.Since(used) < minAge || inUse(id) {
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove size variant %s@%s: %w", name, id, err)
	}
	b.mu.Lock()
	delete(b.usedAt, id)
	b.mu.Unlock()
	b.log.Info("size variant removed: unused", "template", name, "variant", id, "size_of", md.BaseID)
	return true, nil
}
