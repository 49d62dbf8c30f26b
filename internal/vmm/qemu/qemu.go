// Package qemu implements vmm.Driver with QEMU's microvm machine.
//
// Every VM maps its RAM from a file of its own (memory-backend-file,
// share=on) and has a raw disk file of its own, both on a reflink-capable
// filesystem (package cowfs). Saving a VM writes only its device state
// (migration with x-ignore-shared: ~60 KB, milliseconds); its RAM is already
// in its file. Restores come from a pool of QEMU processes started ahead with
// "-incoming defer" on empty files of the right machine and size, their QMP
// and agent sockets connected: a restore reflinks the snapshot's RAM and disk
// into the process's files (the kernel drops the stale mapping), passes the
// device state, and resumes. Template creates, snapshot restores, wakes and
// forks all take that one path — except the wake of a VM whose hibernated
// process is still parked (park.go): that one continues where it stopped.
//
// Each QEMU runs as its own unprivileged uid, in its own session, under
// QEMU's seccomp policy (-sandbox on, no spawning, no privilege changes). VMs
// never open snapshot files: those stay readable by the server alone.
package qemu

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/jail"
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
	// Network, if set, gives each VM's NIC a tap (see internal/network);
	// without it the NIC has no peer.
	Network vmm.Network
	// NoJail runs QEMU without its jail (namespaces, own root, cgroup) even
	// as root: for A/B measurements. PANDASTACK_JAIL=off does the same.
	NoJail bool
	// MaxSerialLog caps each VM's serial console log (default
	// DefaultMaxSerialLog; below 0 no cap).
	MaxSerialLog int64
	// ParkFor is how long a hibernated VM's process is kept, stopped, for
	// a wake (park.go; default DefaultParkFor), and MaxParked how many at
	// most (default DefaultMaxParked), holding ParkMemory bytes of their
	// own memory at most (default an eighth of the host's). Below 0, or
	// PANDASTACK_PARK=off: a hibernation ends the process.
	ParkFor    time.Duration
	MaxParked  int
	ParkMemory int64
	// TrimAfter is how long a restored VM runs before the page cache of
	// its RAM file that the guest has not touched is dropped (cachetrim.go;
	// default DefaultTrimAfter, below 0 never).
	TrimAfter time.Duration
}

// DefaultUIDBase is where per-VM uids start when running as root.
const DefaultUIDBase = 1_500_000

// Driver is the QEMU vmm.Driver.
type Driver struct {
	cfg    Config
	log    *slog.Logger
	groups []uint32
	nice   string // the nice binary

	fills sync.WaitGroup // pool refills in flight
	logs  sync.WaitGroup // the serial log capper
	reaps sync.WaitGroup // hibernated VMs' processes being reaped
	mu    sync.Mutex
	uids  map[int]bool
	pools map[string]*pool
	// parked: hibernated VMs' processes kept for a wake, by VM id; the
	// limits on them are fixed at New (setParkLimits).
	parked     map[string]*parked
	parkFor    time.Duration
	maxParked  int
	parkBudget int64
	ctx        context.Context
	stop       context.CancelFunc

	// jailed: VMs run in jails (jail.go); cgroups caps them there.
	jailed  bool
	jailWhy string
	cgroups *jail.Cgroups
	ioDev   string // MAJ:MIN of the device the VM files are on
	// merge: QEMU's own memory is open to same-page merging (ksm.go).
	merge    bool
	mergeWhy string
	ksmTune  sync.WaitGroup // the scan rate's tuner, if this driver started ksmd
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
	if !cowfs.Supported(cfg.Dir) {
		return nil, fmt.Errorf("vm dir %s cannot reflink: VM files must be on XFS (reflink=1) or btrfs (see package cowfs)", cfg.Dir)
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		return nil, fmt.Errorf("find nice (coreutils): %w", err)
	}
	d := &Driver{cfg: cfg, log: cfg.Logger, nice: nice, uids: map[int]bool{}, pools: map[string]*pool{}}
	d.ctx, d.stop = context.WithCancel(context.Background())
	d.setParkLimits()
	d.sweepReaped()
	if cfg.MaxSerialLog == 0 {
		cfg.MaxSerialLog = DefaultMaxSerialLog
	}
	if cfg.MaxSerialLog > 0 {
		d.logs.Add(1)
		go func() {
			defer d.logs.Done()
			d.capSerialLogs(d.ctx, cfg.MaxSerialLog)
		}()
	}
	if d.parkFor > 0 {
		d.logs.Add(1)
		go func() {
			defer d.logs.Done()
			d.parkJanitor(d.ctx)
		}()
	}
	if cfg.UIDBase > 0 {
		d.groups = append(d.groups, uint32(vmGroup(cfg.UIDBase)))
	}
	if st, err := os.Stat("/dev/kvm"); err == nil {
		// Never root's group, which /dev/kvm has on some hosts: the VM
		// would get every file readable by group 0.
		if s, ok := st.Sys().(*syscall.Stat_t); ok && s.Gid != 0 {
			d.groups = append(d.groups, s.Gid)
		}
	}
	d.setupJail()
	d.setupMerge()
	d.sweepParked()
	return d, nil
}

func (d *Driver) Name() string            { return "qemu" }
func (d *Driver) Accel() pandastack.Accel { return d.cfg.Accel }
func (d *Driver) UID(v vmm.VM) int        { return v.(*vm).uid }

// newID names a VM the driver starts on its own (a pooled process, a cold
// boot): a restore renames it to the id its caller gives.
func newID() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return "vm_" + hex.EncodeToString(b)
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
	dir := filepath.Join(d.cfg.Dir, spec.ID)
	args := buildArgs(argSpec{dir: dir, accel: d.cfg.Accel, m: spec.Machine,
		memFile: spec.MemFile, disk: spec.Disk, diskFormat: diskFormat(spec.Disk), volFD: 3})
	// The booting VM writes its disk and RAM file: hand them to its uid.
	uid := d.allocUID()
	for _, p := range []string{spec.MemFile, spec.Disk} {
		if uid > 0 {
			if err := os.Chown(p, uid, uid); err != nil {
				d.releaseUID(uid)
				return nil, fmt.Errorf("chown %s: %w", p, err)
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		d.releaseUID(uid)
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	slots, err := openSlots(dir, [vmm.VolumeSlots]vmm.VolumeFile{}, uid, spec.Machine.VolumeSlots)
	if err != nil {
		d.releaseUID(uid)
		os.RemoveAll(dir)
		return nil, err
	}
	defer closeAll(slots)
	v, err := d.start(ctx, spec.ID, uid, args, "", spec.Machine, vmFiles{mem: spec.MemFile, bootDisk: spec.Disk}, slots...)
	if err != nil {
		return nil, err
	}
	v.mem, v.disk = spec.MemFile, spec.Disk
	// The direct port's host is connected from the start, so a snapshot
	// of this VM saves it connected, as every restore has it (prepare):
	// a restored guest sees no change of host on the port.
	if spec.Machine.DirectPort {
		if v.direct, err = v.DirectConn(ctx); err != nil {
			v.Kill(context.Background())
			return nil, fmt.Errorf("connect direct socket: %w", err)
		}
	}
	return v, nil
}

// prepare starts a QEMU process for machine m with a disk of diskSize
// bytes, waiting for an incoming snapshot: its RAM and disk files exist and
// are mapped and opened, its agent socket is connected. With preload, the
// files are clones of that snapshot's and the RAM is read into the page
// cache (off the create path, in a pool); without, they are empty.
//
// vols are what its volume slots hold: empty slots get placeholders.
//
// id names it ("" picks a name: a pooled process is renamed when a restore
// takes it, but its QEMU -name stays the one it started with).
func (d *Driver) prepare(ctx context.Context, id string, m vmm.Machine, diskSize int64, preload *vmm.Snapshot, vols [vmm.VolumeSlots]vmm.VolumeFile) (*vm, error) {
	if id == "" {
		id = newID()
	}
	dir := filepath.Join(d.cfg.Dir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	mem, disk := filepath.Join(dir, vmm.MemFile), filepath.Join(dir, vmm.DiskFile)
	uid := d.allocUID()
	cleanup := func() {
		d.releaseUID(uid)
		os.RemoveAll(dir)
	}
	for _, f := range []struct {
		path, from string
		size       int64
	}{{mem, "", int64(m.MemoryMiB) << 20}, {disk, "", diskSize}} {
		if preload != nil {
			f.from = preload.MemFile
			if f.path == disk {
				f.from = preload.Disk
			}
		}
		if err := makeFile(f.path, f.from, f.size, uid); err != nil {
			cleanup()
			return nil, err
		}
	}
	if preload != nil {
		if err := cowfs.Prefetch(mem); err != nil {
			cleanup()
			return nil, err
		}
	}
	// The root disk dies with the sandbox: guest flushes need not reach the
	// host's disk (a reflink copy flushes what it needs itself).
	args := buildArgs(argSpec{dir: dir, accel: d.cfg.Accel, m: m, memFile: mem,
		disk: disk, diskFormat: "raw", diskCache: "unsafe", diskFD: true, incoming: true, volFD: 5})
	rw, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("open disk: %w", err)
	}
	defer rw.Close()
	ro, err := os.Open(disk)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("open disk: %w", err)
	}
	defer ro.Close()
	slots, err := openSlots(dir, vols, uid, m.VolumeSlots)
	if err != nil {
		cleanup()
		return nil, err
	}
	defer closeAll(slots)
	v, err := d.start(ctx, id, uid, args, machineKey(m, diskSize), m, vmFiles{mem: mem}, append([]*os.File{rw, ro}, slots...)...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	v.mem, v.disk, v.diskSize = mem, disk, diskSize
	for i, f := range vols {
		switch {
		case f.Path != "" && f.Copy:
			v.copies[i] = true
		case f.Path != "":
			v.vols[i] = f.Path
		}
	}
	if vols != ([vmm.VolumeSlots]vmm.VolumeFile{}) {
		if err := v.writeMeta(); err != nil {
			v.Kill(context.Background())
			return nil, err
		}
	}
	if preload != nil {
		v.loaded = preload.MemFile + "\x00" + preload.Disk
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
	// Connecting before the state is loaded means the restored guest never
	// sees its host disconnect: its pending read simply gets the new Hello.
	if v.agent, err = v.AgentConn(ctx); err != nil {
		return fail(fmt.Errorf("connect agent socket: %w", err))
	}
	// So for the direct port: the process in the guest that reads it
	// (blocked in its read when the snapshot was saved) keeps its host.
	if m.DirectPort {
		if v.direct, err = v.DirectConn(ctx); err != nil {
			return fail(fmt.Errorf("connect direct socket: %w", err))
		}
	}
	return v, nil
}

// makeFile creates a file of size bytes owned by uid: a clone of from, or
// empty and sparse.
func makeFile(path, from string, size int64, uid int) error {
	if from != "" {
		if err := cowfs.Clone(path, from, 0o600); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("size %s: %w", filepath.Base(path), err)
	}
	if uid > 0 {
		if err := f.Chown(uid, uid); err != nil {
			return fmt.Errorf("chown %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}

// machineKey names the pool that can restore snapshots of machine m with a
// disk of diskSize bytes.
func machineKey(m vmm.Machine, diskSize int64) string {
	b, _ := json.Marshal(m)
	h := sha256.Sum256(append(b, fmt.Sprint(diskSize)...))
	return hex.EncodeToString(h[:8])
}

// Restore starts a VM from snap, in a pooled process when one is ready,
// named opts.ID, with opts.Network applied before it resumes.
func (d *Driver) Restore(ctx context.Context, snap vmm.Snapshot, opts vmm.RestoreOptions) (vmm.VM, error) {
	v, err := d.restore(ctx, snap, opts)
	if err != nil {
		if opts.ID != "" {
			return nil, fmt.Errorf("restore %s: %w", opts.ID, err)
		}
		return nil, err
	}
	return v, nil
}

// restore starts a VM from snap; a non-empty opts.ID renames it.
func (d *Driver) restore(ctx context.Context, snap vmm.Snapshot, opts vmm.RestoreOptions) (*vm, error) {
	id := opts.ID
	if id != "" && (id != filepath.Base(id) || strings.HasPrefix(id, ".")) {
		return nil, fmt.Errorf("restore %s: %q is not a valid vm name", snap.Key, id)
	}
	if v, ok, err := d.unpark(ctx, snap, opts); ok {
		return v, err
	}
	t0 := time.Now()
	st, err := os.Stat(snap.Disk)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", snap.Key, err)
	}
	// Pooled processes have placeholders open in their volume slots: a
	// volume copy is cloned into one (like RAM and disk), and a durable
	// volume's file becomes the placeholder it holds (adopt.go) when they
	// share a filesystem; else a VM is started for it.
	durable := false
	for _, f := range snap.Volumes {
		durable = durable || (f.Path != "" && !f.Copy)
	}
	var v *vm
	if !durable || d.adoptable(snap) {
		v = d.take(snap, st.Size())
	}
	pooled := v != nil
	if v == nil {
		if v, err = d.prepare(ctx, id, snap.Machine, st.Size(), nil, snap.Volumes); err != nil {
			return nil, fmt.Errorf("prepare qemu: %w", err)
		}
	}
	fail := func(err error) (*vm, error) {
		v.Kill(context.Background())
		return nil, err
	}
	if id != "" && v.id != id {
		if err := v.rename(id); err != nil {
			return fail(err)
		}
	}
	tTaken := time.Since(t0)
	var tMem, tDisk, tAhead time.Duration
	// The process has not touched its RAM yet: cloning into the mapped
	// file is safe, and the mapping shows the snapshot from here on.
	if v.loaded != snap.MemFile+"\x00"+snap.Disk {
		if err := cowfs.CloneInto(v.mem, snap.MemFile); err != nil {
			return fail(fmt.Errorf("restore %s: %w", snap.Key, err))
		}
		tMem = time.Since(t0)
		if err := cowfs.CloneInto(v.disk, snap.Disk); err != nil {
			return fail(fmt.Errorf("restore %s: %w", snap.Key, err))
		}
		tDisk = time.Since(t0)
		cowfs.Readahead(v.mem)
		tAhead = time.Since(t0)
	}
	if pooled && snap.HasVolumes() {
		for i, f := range snap.Volumes {
			if f.Path == "" {
				continue
			}
			if i >= v.machine.VolumeSlots {
				return fail(fmt.Errorf("restore %s: volume slot %d: the machine has %d", snap.Key, i, v.machine.VolumeSlots))
			}
			if !f.Copy {
				if err := v.adoptVolume(i, f.Path); err != nil {
					return fail(fmt.Errorf("restore %s: %w", snap.Key, err))
				}
				continue
			}
			if err := cowfs.CloneInto(filepath.Join(v.dir, vmm.VolumeFileName(i)), f.Path); err != nil {
				return fail(fmt.Errorf("restore %s: volume copy: %w", snap.Key, err))
			}
			v.copies[i] = true
		}
		if err := v.writeMeta(); err != nil {
			return fail(err)
		}
	}
	tCloned := time.Since(t0)
	// The policy is in force before the guest runs its first instruction
	// (the process waits in -incoming defer until load resumes it).
	if d.cfg.Network != nil {
		if err := d.cfg.Network.Apply(ctx, v.id, opts.Network); err != nil {
			return fail(fmt.Errorf("restore %s: %w", snap.Key, err))
		}
	}
	defer func() {
		d.log.Debug("restore timing", "vm", v.id, "pooled", pooled, "take_ms", ms(tTaken),
			"clone_ms", ms(tCloned-tTaken), "ms", ms(time.Since(t0)),
			"mem_ms", ms(max(tMem-tTaken, 0)), "disk_ms", ms(max(tDisk-tMem, 0)), "readahead_ms", ms(max(tAhead-tDisk, 0)))
	}()
	sf, err := os.Open(snap.StateFile)
	if err != nil {
		return fail(fmt.Errorf("open state file: %w", err))
	}
	defer sf.Close()
	if err := v.q.runFD(ctx, "getfd", map[string]any{"fdname": "state"}, nil, int(sf.Fd())); err != nil {
		return fail(fmt.Errorf("pass state file: %w", err))
	}
	if err := d.load(ctx, v, v.resizeVolumes); err != nil {
		return fail(fmt.Errorf("restore %s: %w", snap.Key, err))
	}
	d.trimLater(v)
	return v, nil
}

// resizeVolumes sets each volume slot's drive to its file's size, while the
// loaded VM is still paused. QEMU measured the files when it opened them
// (a placeholder, before a copy was cloned into it), and the guest last
// saw the size of what the slot held when it was saved (a placeholder, for
// a volume attached now): block_resize makes QEMU measure again and signal
// a config change, and the guest reads the size again once it runs.
func (v *vm) resizeVolumes(ctx context.Context) error {
	for i := 0; i < v.machine.VolumeSlots && i < vmm.VolumeSlots; i++ {
		f, held := v.slotFile(i)
		if !held {
			continue
		}
		st, err := os.Stat(f)
		if err != nil {
			return fmt.Errorf("volume slot %d: %w", i, err)
		}
		if err := v.q.run(ctx, "block_resize", map[string]any{"device": fmt.Sprintf("vol%d", i), "size": st.Size()}, nil); err != nil {
			return fmt.Errorf("announce volume slot %d size: %w", i, err)
		}
	}
	return nil
}

// openSlots opens the files of a VM's volume slots, read-write and
// read-only each (QEMU opens a drive both ways), for buildArgs' volFD: a
// durable volume in place, a copy (reflink) or a placeholder made in dir.
func openSlots(dir string, vols [vmm.VolumeSlots]vmm.VolumeFile, uid, slots int) ([]*os.File, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		closeAll(files)
		return nil, err
	}
	for i, f := range vols {
		if i >= slots {
			if f.Path != "" {
				return fail(fmt.Errorf("volume slot %d: the machine has %d volume slots", i, slots))
			}
			continue
		}
		path := f.Path
		if path == "" || f.Copy {
			path = filepath.Join(dir, vmm.VolumeFileName(i))
			size := int64(vmm.PlaceholderSize)
			if f.Copy {
				st, err := os.Stat(f.Path)
				if err != nil {
					return fail(fmt.Errorf("volume copy: %w", err))
				}
				size = st.Size()
			}
			from := ""
			if f.Copy {
				from = f.Path
			}
			if err := makeFile(path, from, size, uid); err != nil {
				return fail(err)
			}
		}
		rw, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return fail(fmt.Errorf("open volume slot %d: %w", i, err))
		}
		files = append(files, rw)
		ro, err := os.Open(path)
		if err != nil {
			return fail(fmt.Errorf("open volume slot %d: %w", i, err))
		}
		files = append(files, ro)
	}
	return files, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// load streams the passed state into a prepared VM and resumes it: the
// state was saved from a stopped VM, so QEMU stays paused after the load
// (its drives active again) until told to continue; beforeCont runs then.
func (d *Driver) load(ctx context.Context, v *vm, beforeCont func(context.Context) error) error {
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
	if beforeCont != nil {
		if err := beforeCont(ctx); err != nil {
			return err
		}
	}
	t1 := time.Now()
	if err := v.q.run(ctx, "cont", nil, nil); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	d.log.Debug("restored", "vm", v.id, "load_ms", t1.Sub(t0).Seconds()*1000, "cont_ms", time.Since(t1).Seconds()*1000)
	return nil
}

func syscallKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// Recover re-attaches to a VM whose process outlived an earlier server.
func (d *Driver) Recover(ctx context.Context, id string) (vmm.VM, error) {
	dir := filepath.Join(d.cfg.Dir, id)
	// The directory may have been writable by the VM's uid (an unjailed
	// VM): its record is read without following links, and the process
	// it names must run as the uid it names.
	b, err := jail.ReadFileBeneath(dir, metaFile, 1<<20)
	var m meta
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err == nil && m.UID > 0 && m.PID > 0 {
		if u, uerr := uidOf(m.PID); uerr == nil && u != m.UID {
			err = fmt.Errorf("process %d runs as uid %d, not the VM's %d", m.PID, u, m.UID)
			m.PID = 0
		}
	}
	gone := func() (vmm.VM, error) {
		if m.PID > 0 && isOurQEMU(m.PID, m.name()) {
			_ = syscall.Kill(m.PID, syscall.SIGKILL)
		}
		name := m.name()
		if name == "" {
			name = id
		}
		if m.PID <= 0 {
			// No record (a crash between starting QEMU and writing
			// vm.json): find the process by its -name and its files.
			for _, pid := range qemuNamed(name, dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		d.releaseCgroupOf(name, m.PID)
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove vm dir: %w", err)
		}
		return nil, vmm.ErrGone
	}
	if err != nil || m.PID <= 0 || !isOurQEMU(m.PID, m.name()) {
		return gone()
	}
	v := &vm{d: d, id: id, dir: dir, uid: m.UID, pid: m.PID, exited: make(chan struct{}), name: m.name(), machine: m.Machine,
		mem: filepath.Join(dir, vmm.MemFile), disk: filepath.Join(dir, vmm.DiskFile), vols: m.Volumes, copies: m.Copies}
	if st, err := os.Stat(v.disk); err == nil {
		v.diskSize = st.Size()
	}
	if err := watchPID(m.PID, v.exited); err != nil {
		return gone()
	}
	if v.q, err = dialQMP(ctx, filepath.Join(dir, qmpSock), v.exited); err != nil {
		return gone()
	}
	if st, err := v.runState(ctx); err != nil || st != "running" {
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

// qemuNamed lists the QEMU processes started with -name name whose command
// line names files in dir.
func qemuNamed(name, dir string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isOurQEMU(pid, name) {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(b), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isOurQEMU checks that pid is a QEMU process started with -name name —
// or the jail child that will exec it (argv: jail.ChildName, the QEMU
// binary, QEMU's arguments) with the same pid: a server killed while a
// jail was being set up must still find the process, or it execs QEMU
// after the restart's recovery has looked, and runs with no VM directory.
func isOurQEMU(pid int, name string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	if len(args) >= 2 && args[0] == jail.ChildName {
		args = args[1:]
	}
	if len(args) < 3 || !strings.Contains(args[0], "qemu") {
		return false
	}
	for i := 1; i+1 < len(args); i++ {
		if args[i] == "-name" {
			return args[i+1] == name
		}
	}
	return false
}

// List returns the VM directories on this host, whoever named them.
func (d *Driver) List() ([]string, error) {
	ents, err := os.ReadDir(d.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("list vm dirs: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// Close kills the pooled (never handed out) processes.
func (d *Driver) Close() error {
	d.stop()
	d.fills.Wait()
	d.logs.Wait()
	d.ksmTune.Wait()
	d.endAllParked()
	d.reaps.Wait()
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
	if d.cgroups != nil {
		d.cgroups.Close()
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

// vmGroup is the group every VM process has (for /dev/kvm and the VM
// directory tree).
func vmGroup(uidBase int) int { return uidBase - 1 }

// Seal makes a snapshot's files read-only. Restored VMs never open them (a
// restore clones them into files of the VM's own); the disk stays readable
// by the VM group, because a cold boot may chain a qcow2 overlay on it (a
// custom template's build steps).
func (d *Driver) Seal(snap vmm.Snapshot) error {
	gid := 0
	if d.cfg.UIDBase > 0 {
		gid = vmGroup(d.cfg.UIDBase)
	}
	for _, f := range []string{snap.StateFile, snap.Disk, snap.MemFile} {
		mode := os.FileMode(0o400)
		if f == snap.Disk {
			mode = 0o440
		}
		if os.Getuid() == 0 {
			if err := os.Chown(f, 0, gid); err != nil {
				return fmt.Errorf("seal %s: %w", f, err)
			}
		}
		if err := os.Chmod(f, mode); err != nil {
			return fmt.Errorf("seal %s: %w", f, err)
		}
	}
	return nil
}

// waitTimeout is how long a pool refill may take for one process.
const waitTimeout = 30 * time.Second

// diskFormat tells QEMU's image format from the file name.
func diskFormat(path string) string {
	if strings.HasSuffix(path, ".qcow2") {
		return "qcow2"
	}
	return "raw"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
