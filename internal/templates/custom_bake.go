package templates

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/vmm"
)

// bakedRecord is a bake record and whether it came from the cache.
type bakedRecord struct {
	record
	cached bool
}

// bakeCustom bakes template name (build id) from disk with machine m: the
// shared bake path (cold boot, agent, save) with md's START and READY run
// first. A build already baked is found, not redone.
func (b *Builder) bakeCustom(ctx context.Context, name, id string, m vmm.Machine, disk string, md meta, out io.Writer) (bakedRecord, error) {
	dir := b.dir(name, id)
	if rec, err := readRecord(dir); err == nil {
		return bakedRecord{rec, true}, nil
	}
	def := Def{Name: name, Prepare: md.prepare}
	var rec record
	var err error
	for attempt := 1; ; attempt++ { // a cold boot under emulation can stall on a busy host
		rec, err = b.bake(ctx, def, m, disk, dir, id, out)
		if err == nil || attempt == 2 || ctx.Err() != nil || pandastack.ErrorCode(err) == pandastack.EInvalid {
			break
		}
		fmt.Fprintf(out, "bake attempt %d failed, retrying: %v\n", attempt, err)
	}
	if err != nil {
		return bakedRecord{}, err
	}
	if err := writeMeta(dir, md); err != nil {
		os.RemoveAll(dir)
		return bakedRecord{}, err
	}
	if err := writeRecord(dir, rec); err != nil {
		os.RemoveAll(dir)
		return bakedRecord{}, err
	}
	return bakedRecord{rec, false}, nil
}

// prepare runs in the booted guest before the bake: WORKDIR is made, START
// is left running in the background, and READY is retried until it exits 0.
func (md meta) prepare(ctx context.Context, cl *guestconn.Client, out io.Writer) error {
	if md.DiskGiB != 0 {
		if err := growGuest(ctx, cl, out); err != nil {
			return err
		}
	}
	if md.Workdir != "" {
		if err := cl.MakeDir(ctx, md.Workdir); err != nil {
			return fmt.Errorf("create WORKDIR %s: %w", md.Workdir, err)
		}
	}
	base := pandastack.ExecRequest{Env: md.Env, Cwd: md.Workdir, User: md.User}
	if md.Start != "" {
		req := base
		req.Cmd, req.Background = md.Start, true
		if _, err := cl.Exec(ctx, req, nil, func(pandastack.ExecEvent) error { return nil }); err != nil {
			return pandastack.Errorf(pandastack.EInvalid, "START %s: %v", md.Start, err)
		}
		fmt.Fprintf(out, "START %s: running\n", md.Start)
	}
	if md.Ready == "" {
		return nil
	}
	deadline := time.Now().Add(md.ReadyTimeout)
	var last tailWriter
	for attempt := 1; ; attempt++ {
		req := base
		req.Cmd, req.TimeoutSeconds = md.Ready, 10
		last = tailWriter{}
		res, err := cl.Exec(ctx, req, nil, func(ev pandastack.ExecEvent) error {
			if ev.Type == "stdout" || ev.Type == "stderr" {
				last.Write(ev.Data)
			}
			return nil
		})
		if err == nil && res.ExitCode == 0 && !res.TimedOut {
			fmt.Fprintf(out, "READY %s: passed (attempt %d)\n", md.Ready, attempt)
			return nil
		}
		if time.Now().After(deadline) {
			return pandastack.Errorf(pandastack.EInvalid, "READY %s did not pass within %s (last exit %d, error %v); output:\n%s",
				md.Ready, md.ReadyTimeout, res.ExitCode, err, last.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// SizedSnapshot returns what to restore template ref from at another size:
// the variant of its build with cpus and memMiB (0: unchanged), baked on
// first use from the build's own disk (a snapshot restores only onto the
// machine that saved it) and kept next to the build.
func (b *Builder) SizedSnapshot(ctx context.Context, ref string, cpus, memMiB, diskGiB int) (vmm.Snapshot, pandastack.Template, error) {
	if err := CheckSize(cpus, memMiB, diskGiB); err != nil {
		return vmm.Snapshot{}, pandastack.Template{}, err
	}
	snap, t, err := b.Snapshot(ctx, ref)
	if err != nil {
		return snap, t, err
	}
	if diskGiB != 0 && diskGiB<<10 < t.DiskMiB {
		return vmm.Snapshot{}, pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid,
			"disk_gib %d is smaller than the template's disk (%d MiB): disks only grow", diskGiB, t.DiskMiB)
	}
	if diskGiB<<10 == t.DiskMiB {
		diskGiB = 0
	}
	if (cpus == 0 || cpus == snap.Machine.CPUs) && (memMiB == 0 || memMiB == snap.Machine.MemoryMiB) && diskGiB == 0 {
		return snap, t, nil
	}
	base := t.ID
	if md, err := readMeta(b.dir(t.Name, t.ID)); err == nil && md.BaseID != "" {
		base = md.BaseID
	}
	m := snap.Machine
	if cpus != 0 {
		m.CPUs = cpus
	}
	if memMiB != 0 {
		m.MemoryMiB = memMiB
	}
	if diskGiB == 0 && base != t.ID { // a variant of a variant keeps its grown disk
		if md, err := readMeta(b.dir(t.Name, t.ID)); err == nil {
			diskGiB = md.DiskGiB
		}
	}
	id := hashOf("variant", base, fmt.Sprint(m.CPUs, m.MemoryMiB, diskGiB))
	if !b.takeVariant(t.Name, id) {
		// One new variant of a build at a time, within the bound.
		unlock := b.lock(t.Name + "@" + base + "/variants")
		err := b.newVariant(ctx, t.Name, base, id, m, diskGiB)
		unlock()
		if err != nil {
			return vmm.Snapshot{}, pandastack.Template{}, err
		}
	}
	b.variantUsed(id)
	vsnap, vt, err := b.Snapshot(ctx, t.Name+"@"+id)
	vt.Version = t.Version // a variant is of its build's version
	return vsnap, vt, err
}

// newVariant bakes variant id of build base unless it exists meanwhile,
// refusing it when the build has as many variants as allowed.
func (b *Builder) newVariant(ctx context.Context, name, base, id string, m vmm.Machine, diskGiB int) error {
	if _, err := os.Stat(filepath.Join(b.dir(name, id), "template.json")); err == nil {
		return nil
	}
	if err := b.checkVariants(name, base); err != nil {
		return err
	}
	return b.bakeVariant(ctx, name, base, id, m, diskGiB)
}

// bakeVariant bakes build base of template name again on machine m.
func (b *Builder) bakeVariant(ctx context.Context, name, base, id string, m vmm.Machine, diskGiB int) error {
	defer b.lock(name + "@" + id)()
	dir := b.dir(name, id)
	if _, err := readRecord(dir); err == nil {
		return nil // baked meanwhile
	}
	brec, err := readRecord(b.dir(name, base))
	if err != nil {
		return fmt.Errorf("read template %s@%s: %w", name, base, err)
	}
	// The build's disk as it was before its bake.
	img := brec.Image
	if img == "" {
		return fmt.Errorf("template %s@%s has no pre-bake image recorded", name, base)
	}
	md, _ := readMeta(b.dir(name, base))
	if diskGiB != 0 {
		if img, err = b.grownDisk(ctx, img, diskGiB); err != nil {
			return err
		}
		md.DiskGiB = diskGiB
	}
	def := Def{Name: name, Prepare: md.prepare}
	if c, ok := Catalog[name]; ok {
		def.Warm, def.DiskMiB = c.Warm, c.DiskMiB
	}
	md.BaseID, md.Steps = base, nil
	b.log.Info("baking size variant", "template", name, "build", base, "cpus", m.CPUs, "memory_mib", m.MemoryMiB)
	rec, err := b.bake(ctx, def, m, img, dir, id, io.Discard)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.EInvalid {
			return err
		}
		return fmt.Errorf("bake %s at %d cpus, %d MiB: %w", name, m.CPUs, m.MemoryMiB, err)
	}
	if err := writeMeta(dir, md); err != nil {
		os.RemoveAll(dir)
		return err
	}
	if err := writeRecord(dir, rec); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}
