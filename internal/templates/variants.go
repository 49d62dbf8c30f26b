package templates

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

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
