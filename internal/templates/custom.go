package templates

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/jail"
	"github.com/pandastack/pandastack/internal/templates/spec"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Custom templates: a spec file's steps run one by one, each in a microVM
// cold-booted from the previous step's disk (RUN is untrusted code: it runs
// only inside a guest, through the guest agent). Each finished step's disk is
// kept under DATA/steps/KEY, a qcow2 overlay on the previous one, where KEY
// hashes the parent build, every instruction so far and, for COPY, the
// content copied: a rebuild redoes only the steps after the first changed
// one. ENV, WORKDIR and USER change no disk; they shape later steps and the
// defaults of the template's sandboxes. After the last step the image is
// baked like a catalog template, with START running and READY passed.

// stepTimeout bounds one RUN step.
const stepTimeout = 30 * time.Minute

// Limits on a template's size.
const (
	MaxCPUs      = 8
	MinMemoryMiB = 128
	MaxMemoryMiB = 16384
)

// CheckSize refuses a size outside the limits (0 means "unchanged").
func CheckSize(cpus, memMiB, diskGiB int) error {
	if diskGiB < 0 || diskGiB > MaxDiskGiB {
		return pandastack.Errorf(pandastack.EInvalid, "disk_gib must be between 1 and %d, got %d", MaxDiskGiB, diskGiB)
	}
	if cpus < 0 || cpus > MaxCPUs {
		return pandastack.Errorf(pandastack.EInvalid, "cpus must be between 1 and %d, got %d", MaxCPUs, cpus)
	}
	if memMiB != 0 && (memMiB < MinMemoryMiB || memMiB > MaxMemoryMiB) {
		return pandastack.Errorf(pandastack.EInvalid, "memory_mib must be between %d and %d, got %d", MinMemoryMiB, MaxMemoryMiB, memMiB)
	}
	return nil
}

// stepState is what the instructions so far have set.
type stepState struct {
	key     string // content key of the disk so far
	disk    string // the disk so far
	env     map[string]string
	workdir string
	user    string
}

// BuildCustom builds template req.Name of team req.TeamID from a spec file
// and a build context directory, streaming progress to log; req.Run, when
// set, records the run (started once the spec and the context are found
// valid) and its steps. The build it returns is not yet a version: the
// registry numbers versions.
func (b *Builder) BuildCustom(ctx context.Context, req pandastack.CustomBuild, log io.Writer) (pandastack.Template, error) {
	if _, ok := Catalog[req.Name]; ok && req.TeamID == "" {
		return pandastack.Template{}, pandastack.Errorf(pandastack.EConflict, "%q is a catalog template; choose another name for a custom one", req.Name)
	}
	sp, err := spec.Parse(bytes.NewReader(req.Spec))
	if err != nil {
		var pe *spec.Error
		if errors.As(err, &pe) {
			return pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "spec %s", pe.Error())
		}
		return pandastack.Template{}, err
	}
	if req.CPUs != 0 {
		sp.CPUs = req.CPUs
	}
	if req.MemoryMiB != 0 {
		sp.MemoryMiB = req.MemoryMiB
	}
	if req.DiskGiB != 0 {
		sp.DiskGiB = req.DiskGiB
	}
	if err := CheckSize(sp.CPUs, sp.MemoryMiB, sp.DiskGiB); err != nil {
		return pandastack.Template{}, err
	}
	root, err := os.OpenRoot(req.Context)
	if err != nil {
		return pandastack.Template{}, fmt.Errorf("open build context: %w", err)
	}
	defer root.Close()
	from := sp.From
	if req.ResolveFrom != nil {
		// The team's own templates, then the public catalog: never
		// another team's.
		if from, err = req.ResolveFrom(ctx, sp.From); err != nil {
			return pandastack.Template{}, pandastack.Errorf(pandastack.ErrorCode(err), "spec line 1: FROM %s: %s", sp.From, errText(err))
		}
	}
	parentSnap, parent, err := b.Snapshot(ctx, from)
	if err != nil {
		return pandastack.Template{}, pandastack.Errorf(pandastack.ErrorCode(err), "spec line 1: FROM %s: %v", sp.From, err)
	}
	// Validate every COPY before any VM starts: an escape is refused up front.
	copyKeys := map[int]string{}
	for _, in := range sp.Steps {
		if in.Op == spec.Copy {
			h, err := copyHash(root, in.Src)
			if err != nil {
				return pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "spec line %d: %s", in.Line, errText(err))
			}
			copyKeys[in.Line] = h
		}
	}
	defer b.lock(req.TeamID + "/" + req.Name)()
	out, step := log, func(pandastack.BuildStep) {}
	if req.Run != nil {
		runLog, err := req.Run.Start(ctx)
		if err != nil {
			return pandastack.Template{}, err
		}
		out, step = io.MultiWriter(log, runLog), req.Run.Step
	}
	fmt.Fprintf(out, "template %s FROM %s (build %s)\n", req.Name, sp.From, parent.ID)
	return b.buildCustom(ctx, req, sp, root, parentSnap, parent, copyKeys, step, out)
}

func (b *Builder) buildCustom(ctx context.Context, req pandastack.CustomBuild, sp *spec.Spec, root *os.Root, parentSnap vmm.Snapshot,
	parent pandastack.Template, copyKeys map[int]string, step func(pandastack.BuildStep), out io.Writer) (pandastack.Template, error) {
	t0 := time.Now()
	// Each team's builds have keys of their own: a step or a bake is never
	// shared across teams (a RUN may make secrets).
	st := stepState{key: hashOf("custom-base", parent.Name, parent.ID), disk: parentSnap.Disk, env: map[string]string{}}
	if req.TeamID != "" {
		st.key = hashOf("custom-base", "team", req.TeamID, parent.Name, parent.ID)
	}
	for k, v := range parent.Defaults.Env {
		st.env[k] = v
	}
	st.workdir, st.user = parent.Defaults.Workdir, parent.Defaults.User
	m := parentSnap.Machine
	if sp.CPUs != 0 {
		m.CPUs = sp.CPUs
	}
	if sp.MemoryMiB != 0 {
		m.MemoryMiB = sp.MemoryMiB
	}
	total := len(sp.Steps) + 1
	var steps []pandastack.BuildStep
	for i, in := range sp.Steps {
		ts := time.Now()
		st.key = hashOf("step", st.key, in.Text(), copyKeys[in.Line])
		bs := pandastack.BuildStep{Number: i + 1, Line: in.Line, Instruction: in.Text()}
		noDisk := true // ENV, WORKDIR, USER: nothing to run, nothing to redo
		switch in.Op {
		case spec.Env:
			for _, kv := range in.Env {
				st.env[kv[0]] = kv[1]
			}
			bs.Cached = true
		case spec.Workdir:
			st.workdir = in.Args
			bs.Cached = true
		case spec.User:
			st.user = in.Args
			bs.Cached = true
		default:
			noDisk = false
			dir := filepath.Join(b.cfg.DataDir, "steps", st.key)
			disk := filepath.Join(dir, "disk.qcow2")
			// Builds of other templates may share this step (same parent,
			// same instructions so far): one runs it, the other finds it.
			unlock := b.lock("step:" + st.key)
			if _, err := os.Stat(disk); err == nil {
				bs.Cached = true
			} else {
				fmt.Fprintf(out, "[%d/%d] line %d: %s\n", i+1, total, in.Line, in.Text())
				if err := b.runStep(ctx, m, st, in, root, dir, out); err != nil {
					unlock()
					return pandastack.Template{}, stepError(i+1, total, in, err)
				}
			}
			unlock()
			st.disk = disk
		}
		if noDisk {
			fmt.Fprintf(out, "[%d/%d] line %d: %s: set\n", i+1, total, in.Line, in.Text())
		} else if bs.Cached {
			fmt.Fprintf(out, "[%d/%d] line %d: %s: CACHED\n", i+1, total, in.Line, in.Text())
		} else {
			fmt.Fprintf(out, "[%d/%d] line %d: done in %s\n", i+1, total, in.Line, time.Since(ts).Round(time.Millisecond))
		}
		bs.DurationMs = float64(time.Since(ts).Microseconds()) / 1000
		step(bs)
		steps = append(steps, bs)
	}
	md := meta{Parent: parent.Name + "@" + parent.ID, Env: st.env, Workdir: st.workdir, User: st.user}
	if sp.Start != nil {
		md.Start = sp.Start.Args
	}
	if sp.Ready != nil {
		md.Ready, md.ReadyTimeout = sp.Ready.Args, sp.ReadyTimeout
	}
	if sp.DiskGiB != 0 && sp.DiskGiB<<10 != b.diskMiB(ctx, st.disk) {
		grown, err := b.grownDisk(ctx, st.disk, sp.DiskGiB)
		if err != nil {
			return pandastack.Template{}, err
		}
		st.disk, md.DiskGiB = grown, sp.DiskGiB
	}
	id := hashOf("custom-bake", st.key, md.Start, md.Ready, md.ReadyTimeout.String(), fmt.Sprint(m.CPUs, m.CPUModel, m.MemoryMiB, m.Cmdline),
		string(b.cfg.Driver.Accel()), qemuVersion(), fmt.Sprint(md.DiskGiB))
	fmt.Fprintf(out, "[%d/%d] bake: cold boot, START, READY, save the VM\n", total, total)
	bs := pandastack.BuildStep{Number: total, Instruction: "bake"}
	ts := time.Now()
	rec, err := b.bakeCustom(ctx, req.Name, id, m, st.disk, md, out)
	if err != nil {
		return pandastack.Template{}, err
	}
	if bs.Cached = rec.cached; bs.Cached {
		fmt.Fprintf(out, "[%d/%d] bake: CACHED\n", total, total)
	}
	bs.DurationMs = float64(time.Since(ts).Microseconds()) / 1000
	step(bs)
	t := rec.Template
	t.TeamID = req.TeamID
	t.DiskMiB = b.diskMiB(ctx, rec.Disk)
	t.Defaults = pandastack.CommandDefaults{Env: md.Env, Workdir: md.Workdir, User: md.User}
	if !rec.cached {
		t.BuildMs = time.Since(t0).Milliseconds()
	}
	md.Steps = append(steps, bs)
	_ = writeMeta(b.dir(req.Name, id), md)
	fmt.Fprintf(out, "built %s in %s\n", id, time.Since(t0).Round(time.Millisecond))
	return t, nil
}

func stepError(n, total int, in spec.Instruction, err error) error {
	return &pandastack.Error{Code: pandastack.EInvalid,
		Message: fmt.Sprintf("step %d/%d (line %d: %s) failed: %s", n, total, in.Line, in.Text(), errText(err)), Err: err}
}

// runStep boots a VM on a new overlay of st.disk, runs one RUN or COPY
// through the guest agent, syncs the guest's disk and keeps the overlay as
// dir/disk.qcow2. Nothing is left in dir unless the step succeeded.
func (b *Builder) runStep(ctx context.Context, m vmm.Machine, st stepState, in spec.Instruction, root *os.Root, dir string, out io.Writer) error {
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	disk := filepath.Join(tmp, "disk.qcow2")
	if o, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", imageFormat(st.disk), "-b", st.disk, disk).CombinedOutput(); err != nil {
		return fmt.Errorf("create step disk: %v: %s", err, o)
	}
	v, err := b.cfg.Driver.Boot(ctx, vmm.BootSpec{Machine: m, Disk: disk, MemFile: filepath.Join(tmp, "mem")})
	if err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	defer v.Kill(context.Background())
	sctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	go func() {
		select {
		case <-v.Exited():
			cancel()
		case <-sctx.Done():
		}
	}()
	bctx, bcancel := context.WithTimeout(sctx, 3*time.Minute)
	cl, err := waitAgent(bctx, v)
	bcancel()
	if err != nil {
		return err
	}
	defer cl.Close()
	if st.workdir != "" {
		if err := cl.MakeDir(sctx, st.workdir); err != nil {
			return fmt.Errorf("create WORKDIR %s: %w", st.workdir, err)
		}
	}
	switch in.Op {
	case spec.Run:
		if err := guestRun(sctx, cl, pandastack.ExecRequest{Cmd: in.Args, Env: st.env, Cwd: st.workdir, User: st.user,
			TimeoutSeconds: stepTimeout.Seconds()}, out); err != nil {
			return err
		}
	case spec.Copy:
		if err := copyIn(sctx, cl, root, in.Src, in.Dst, st.workdir, out); err != nil {
			return err
		}
	default:
		return fmt.Errorf("instruction %s does not run in a VM", in.Op)
	}
	if err := cl.Sync(sctx); err != nil {
		return fmt.Errorf("sync guest disk: %w", err)
	}
	cl.Close()
	if err := v.Kill(ctx); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(tmp, "mem"))
	// The layer was the build VM's (its uid could rewrite it, header and
	// all): it becomes root's, and its backing file must still be the one
	// it was made on, or root's qemu-img would later read whatever file a
	// rewritten header names.
	if err := os.Lchown(disk, 0, 0); err != nil {
		return fmt.Errorf("keep step disk: %w", err)
	}
	_ = os.Chmod(disk, 0o444)
	base, _ := filepath.Abs(st.disk)
	if chain, err := jail.BackingChain(disk); err != nil || len(chain) == 0 || chain[0] != base {
		return fmt.Errorf("step disk: its backing file is no longer %s (%v, %v)", st.disk, chain, err)
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("keep step disk: %w", err)
	}
	return nil
}

// guestRun runs a command in the guest, copying its output to out; a
// non-zero exit is an error carrying the output's tail.
func guestRun(ctx context.Context, cl *guestconn.Client, req pandastack.ExecRequest, out io.Writer) error {
	var tailBuf tailWriter
	w := io.MultiWriter(out, &tailBuf)
	res, err := cl.Exec(ctx, req, nil, func(ev pandastack.ExecEvent) error {
		if ev.Type == "stdout" || ev.Type == "stderr" {
			w.Write(ev.Data)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("run %q: %w", req.Cmd, err)
	}
	if res.TimedOut {
		return pandastack.Errorf(pandastack.EInvalid, "timed out after %.0f s; output: %s", req.TimeoutSeconds, tailBuf.String())
	}
	if res.ExitCode != 0 {
		return pandastack.Errorf(pandastack.EInvalid, "exit code %d; output:\n%s", res.ExitCode, tailBuf.String())
	}
	return nil
}

// tailWriter keeps the last 4 KiB written.
type tailWriter struct{ b []byte }

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string { return strings.TrimRight(string(t.b), "\n") }

// errText is an error's user-facing message, or its whole text when it has
// none (build logs are read by the template's builder).
func errText(err error) string {
	var pe *pandastack.Error
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// cleanInterrupted removes what builds cut short by a stopped server left:
// half-made step disks, half-baked templates (a RAM file and a disk each)
// and unpacked build contexts. Finished steps and templates stay.
func (b *Builder) cleanInterrupted() {
	tmps, _ := filepath.Glob(filepath.Join(b.cfg.DataDir, "steps", "*.tmp"))
	baking, _ := filepath.Glob(filepath.Join(b.cfg.TemplateDir, "*", "*.tmp"))
	tmps = append(tmps, baking...)
	for _, d := range tmps {
		_ = os.RemoveAll(d)
	}
	_ = os.RemoveAll(filepath.Join(b.cfg.DataDir, "contexts"))
}
