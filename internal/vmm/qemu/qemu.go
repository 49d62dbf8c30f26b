// Package qemu implements vmm.Driver with QEMU's microvm machine.
//
// Snapshots use QEMU's "VM templating": the template's RAM is a file that the
// baking VM maps shared; saving writes only device state (x-ignore-shared).
// A restore maps the same file privately, so every clone shares the page
// cache and copies a page only when it writes it. Restores are made from a
// pool of QEMU processes already started with "-incoming defer", their QMP
// and agent sockets connected, so a create pays only for loading ~60 KB of
// device state and resuming the guest.
//
// Each QEMU runs as its own unprivileged uid, in its own session, under
// QEMU's seccomp policy (-sandbox on, no spawning, no privilege changes).
package qemu

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Config configures the driver.
type Config struct {
	Dir    string // where VM directories live, e.g. DATA/vms
	Binary string // qemu-system-x86_64 by default
	Accel  pandastack.Accel
	// UIDBase is the first uid VMs run as; 0 runs QEMU as the caller.
	UIDBase int
	Logger  *slog.Logger
}

// DefaultUIDBase is where per-VM uids start when running as root.
const DefaultUIDBase = 1_500_000

// Driver is the QEMU vmm.Driver.
type Driver struct {
	cfg    Config
	log    *slog.Logger
	groups []uint32
	// romOff: QEMU can map a read-only RAM file privately and writably
	// (readonly=on,rom=off, QEMU >= 8.2). Older QEMU opens it read-write.
	romOff bool

	fills sync.WaitGroup // pool refills in flight
	mu    sync.Mutex
	uids  map[int]bool
	pools map[string]*pool
	ctx   context.Context
	stop  context.CancelFunc
}

var _ vmm.Driver = (*Driver)(nil)

// New makes a driver. It checks that QEMU is installed.
func New(cfg Config) (*Driver, error) {
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("find qemu: %w (install the qemu-system-x86 package)", err)
	}
	cfg.Binary = bin
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Accel == "" {
		cfg.Accel = pandastack.AccelTCG
	}
	if err := os.MkdirAll(cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	if cfg.UIDBase > 0 {
		if err := reachable(cfg.Dir); err != nil {
			return nil, err
		}
	}
	d := &Driver{cfg: cfg, log: cfg.Logger, uids: map[int]bool{}, pools: map[string]*pool{}}
	d.ctx, d.stop = context.WithCancel(context.Background())
	if out, err := exec.Command(bin, "-object", "memory-backend-file,help").CombinedOutput(); err == nil {
		d.romOff = strings.Contains(string(out), "rom=")
	}
	if cfg.UIDBase > 0 {
		d.groups = append(d.groups, uint32(vmGroup(cfg.UIDBase)))
	}
	if st, err := os.Stat("/dev/kvm"); err == nil {
		if s, ok := st.Sys().(*syscall.Stat_t); ok {
			d.groups = append(d.groups, s.Gid)
		}
	}
	return d, nil
}

func (d *Driver) Name() string            { return "qemu" }
func (d *Driver) Accel() pandastack.Accel { return d.cfg.Accel }
func (d *Driver) UID(v vmm.VM) int        { return v.(*vm).uid }
func newID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "sbx_" + hex.EncodeToString(b)
}

func (d *Driver) allocUID() int {
	if d.cfg.UIDBase <= 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := 0; ; i++ {
		uid := d.cfg.UIDBase + i
		if !d.uids[uid] {
			d.uids[uid] = true
			return uid
		}
	}
}

func (d *Driver) releaseUID(uid int) {
	d.mu.Lock()
	delete(d.uids, uid)
	d.mu.Unlock()
}

// Boot cold-boots a VM on a raw disk with its RAM in a shared file.
func (d *Driver) Boot(ctx context.Context, spec vmm.BootSpec) (vmm.VM, error) {
	if spec.ID == "" {
		spec.ID = newID()
	}
	f, err := os.OpenFile(spec.MemFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create memory file: %w", err)
	}
	err = f.Truncate(int64(spec.Machine.MemoryMiB) << 20)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("size memory file: %w", err)
	}
	args := buildArgs(argSpec{dir: filepath.Join(d.cfg.Dir, spec.ID), accel: d.cfg.Accel, m: spec.Machine,
		memFile: spec.MemFile, shared: true, disk: spec.Disk, diskFormat: diskFormat(spec.Disk)})
	// The booting VM writes its disk and RAM file: hand them to its uid.
	uidHint := d.peekUID()
	for _, p := range []string{spec.MemFile, spec.Disk} {
		if uidHint > 0 {
			if err := os.Chown(p, uidHint, uidHint); err != nil {
				return nil, fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	v, err := d.start(ctx, spec.ID, args, "")
	if err != nil {
		return nil, err
	}
	if v.uid != uidHint {
		v.Kill(context.Background())
		return nil, fmt.Errorf("boot: uid changed during start, retry")
	}
	return v, nil
}

// peekUID returns the uid the next start will get.
func (d *Driver) peekUID() int {
	if d.cfg.UIDBase <= 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := 0; ; i++ {
		if uid := d.cfg.UIDBase + i; !d.uids[uid] {
			return uid
		}
	}
}

// prepare starts a QEMU process waiting for an incoming snapshot, with a disk
// overlay of its own, the state file passed and the agent socket connected.
func (d *Driver) prepare(ctx context.Context, snap vmm.Snapshot) (*vm, error) {
	id := newID()
	dir := filepath.Join(d.cfg.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	disk := filepath.Join(dir, diskFile)
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", "-F", diskFormat(snap.BaseDisk), "-b", snap.BaseDisk, disk).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create disk overlay: %v: %s", err, strings.TrimSpace(string(out)))
	}
	v, err := d.prepareAt(ctx, id, snap, disk)
	if err != nil {
		os.RemoveAll(dir)
	}
	return v, err
}

// prepareAt starts QEMU for VM id on disk (inside its directory), waiting
// for snap's state.
func (d *Driver) prepareAt(ctx context.Context, id string, snap vmm.Snapshot, disk string) (*vm, error) {
	uid := d.peekUID()
	if uid > 0 {
		_ = os.Chown(disk, uid, uid)
	}
	args := buildArgs(argSpec{dir: filepath.Join(d.cfg.Dir, id), accel: d.cfg.Accel, m: snap.Machine, memFile: snap.MemFile,
		disk: disk, diskFormat: "qcow2", incoming: true, romOff: d.romOff})
	v, err := d.start(ctx, id, args, snap.Key)
	if err != nil {
		return nil, err
	}
	if v.uid != uid && v.uid > 0 {
		_ = os.Chown(disk, v.uid, v.uid)
	}
	fail := func(err error) (*vm, error) {
		v.Kill(context.Background())
		return nil, err
	}
	caps := map[string]any{"capabilities": []map[string]any{
		{"capability": "x-ignore-shared", "state": true}, {"capability": "events", "state": true}}}
	if err := v.q.run(ctx, "migrate-set-capabilities", caps, nil); err != nil {
		return fail(err)
	}
	sf, err := os.Open(snap.StateFile)
	if err != nil {
		return fail(fmt.Errorf("open state file: %w", err))
	}
	v.stateFile = sf
	if err := v.q.runFD(ctx, "getfd", map[string]any{"fdname": "state"}, nil, int(sf.Fd())); err != nil {
		return fail(err)
	}
	// Connecting before the state is loaded means the restored guest never
	// sees its host disconnect: its pending read simply gets the new Hello.
	if v.agent, err = v.AgentConn(ctx); err != nil {
		return fail(fmt.Errorf("connect agent socket: %w", err))
	}
	return v, nil
}

// Restore starts a VM from snap, from the pool when one is ready.
func (d *Driver) Restore(ctx context.Context, snap vmm.Snapshot) (vmm.VM, error) {
	v := d.take(snap)
	if v == nil {
		var err error
		if v, err = d.prepare(ctx, snap); err != nil {
			return nil, fmt.Errorf("prepare qemu: %w", err)
		}
	}
	if err := d.load(ctx, v); err != nil {
		v.Kill(context.Background())
		return nil, err
	}
	return v, nil
}

// load streams the passed state into a prepared VM and resumes it: the
// state was saved from a stopped VM, so QEMU stays paused after the load
// until told to continue.
func (d *Driver) load(ctx context.Context, v *vm) error {
	for len(v.q.events) > 0 { // left from preparing
		<-v.q.events
	}
	if err := v.q.run(ctx, "migrate-incoming", map[string]any{"uri": "fd:state"}, nil); err != nil {
		return fmt.Errorf("load state: %w", err)
	}
	t0 := time.Now()
	if err := v.waitIncoming(ctx); err != nil {
		return fmt.Errorf("load state: %w: %s", err, v.logTail())
	}
	t1 := time.Now()
	if err := v.q.run(ctx, "cont", nil, nil); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	d.log.Debug("restored", "vm", v.id, "load_ms", t1.Sub(t0).Seconds()*1000, "cont_ms", time.Since(t1).Seconds()*1000)
	v.mu.Lock()
	if v.stateFile != nil {
		v.stateFile.Close()
		v.stateFile = nil
	}
	v.mu.Unlock()
	return nil
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// Recover re-attaches to a VM whose process outlived an earlier server.
func (d *Driver) Recover(ctx context.Context, id string) (vmm.VM, error) {
	dir := filepath.Join(d.cfg.Dir, id)
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	var m meta
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	gone := func() (vmm.VM, error) {
		if m.PID > 0 && isOurQEMU(m.PID, id) {
			_ = syscall.Kill(m.PID, syscall.SIGKILL)
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove vm dir: %w", err)
		}
		return nil, vmm.ErrGone
	}
	if err != nil || m.PID <= 0 || !isOurQEMU(m.PID, id) {
		return gone()
	}
	v := &vm{d: d, id: id, dir: dir, uid: m.UID, pid: m.PID, exited: make(chan struct{})}
	if err := watchPID(m.PID, v.exited); err != nil {
		return gone()
	}
	if v.q, err = dialQMP(ctx, filepath.Join(dir, qmpSock), v.exited); err != nil {
		return gone()
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := v.q.run(ctx, "query-status", nil, &st); err != nil || st.Status != "running" {
		v.q.close()
		return gone()
	}
	if m.UID > 0 {
		d.mu.Lock()
		d.uids[m.UID] = true
		d.mu.Unlock()
	}
	return v, nil
}

// isOurQEMU checks that pid is a QEMU process started for VM id.
func isOurQEMU(pid int, id string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 2 && strings.Contains(args[0], "qemu") && args[1] == "-name" && args[2] == id
}

// List returns the VM directories on this host.
func (d *Driver) List() ([]string, error) {
	ents, err := os.ReadDir(d.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("list vm dirs: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "sbx_") {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Close kills the pooled (never handed out) processes.
func (d *Driver) Close() error {
	d.stop()
	d.fills.Wait()
	d.mu.Lock()
	pools := d.pools
	d.pools = map[string]*pool{}
	d.mu.Unlock()
	var errs []error
	for _, p := range pools {
		p.mu.Lock()
		ready := p.ready
		p.ready = nil
		p.mu.Unlock()
		for _, v := range ready {
			errs = append(errs, v.Kill(context.Background()))
		}
	}
	return errors.Join(errs...)
}

// reachable checks that VM processes, which run as unprivileged uids, can
// reach dir: every ancestor must be searchable by others.
func reachable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("vm dir: %w", err)
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("VM processes run as unprivileged users and cannot reach %s: %s is mode %v (chmod o+x it or choose another data dir)", abs, p, st.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

// vmGroup is the group every VM process has: it may read (and, on QEMU
// older than 8.2, open read-write) snapshot memory files.
func vmGroup(uidBase int) int { return uidBase - 1 }

// Seal makes a snapshot's files read-only for everyone but the VM group, as
// far as this QEMU allows: with rom=off support the RAM file is read-only
// for VMs too; older QEMU opens it read-write even though it maps it
// privately, so the group may write it (a limit stated by doctor).
func (d *Driver) Seal(snap vmm.Snapshot) error {
	gid := 0
	if d.cfg.UIDBase > 0 {
		gid = vmGroup(d.cfg.UIDBase)
	}
	for _, f := range []string{snap.StateFile, snap.BaseDisk, snap.MemFile} {
		mode := os.FileMode(0o440)
		if f == snap.MemFile && !d.romOff {
			mode = 0o660
		}
		if os.Getuid() == 0 {
			if err := os.Chown(f, 0, gid); err != nil {
				return fmt.Errorf("seal %s: %w", f, err)
			}
		} else {
			mode |= 0o600
		}
		if err := os.Chmod(f, mode); err != nil {
			return fmt.Errorf("seal %s: %w", f, err)
		}
	}
	return nil
}

// ReadOnlyRAM reports whether restored VMs get the template RAM file
// read-only (QEMU >= 8.2) rather than read-write.
func (d *Driver) ReadOnlyRAM() bool { return d.romOff }

// waitTimeout is how long a pool refill may take for one process.
const waitTimeout = 30 * time.Second

// diskFormat tells QEMU's image format from the file name.
func diskFormat(path string) string {
	if strings.HasSuffix(path, ".qcow2") {
		return "qcow2"
	}
	return "raw"
}
