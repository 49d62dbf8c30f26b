package qemu_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/templates"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// These tests run real QEMU on a real baked template ("minimal"), built
// once into a shared cache (PANDASTACK_E2E_CACHE) and a per-run data dir.

var (
	once     sync.Once
	snap     vmm.Snapshot
	setupErr error
	dataDir  string
	cowDir   string // the copy-on-write filesystem VM files live on
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeJailChildEnv) != "" {
		// TestRecoveryFindsAJailChildBeforeItExecsQEMU's stand-in for a
		// jail child that has not exec'd QEMU yet.
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	code := m.Run()
	if cowDir != "" {
		if err := cowfs.Unmount(cowDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.RemoveAll(dataDir)
	}
	os.Exit(code)
}

// vmDir is a fresh directory for a driver's VMs on the copy-on-write
// filesystem.
func vmDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(cowDir, "vms-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// template bakes the minimal template once for the package.
func template(t *testing.T) vmm.Snapshot {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("QEMU driver tests need root (debootstrap, per-VM uids); CI runs them as root")
	}
	once.Do(func() {
		if os.Getuid() != 0 {
			setupErr = errors.New("needs root (debootstrap, per-VM uids)")
			return
		}
		cache := os.Getenv("PANDASTACK_E2E_CACHE")
		if cache == "" {
			cache = filepath.Join(os.TempDir(), "pandastack-e2e-cache")
		}
		dataDir, setupErr = os.MkdirTemp("", "ps-qemu-")
		if setupErr != nil {
			return
		}
		_ = os.Chmod(dataDir, 0o711)
		fs, err := cowfs.Open(context.Background(), filepath.Join(dataDir, "cow"), cowfs.Options{Size: 16 << 30})
		if err != nil {
			setupErr = err
			return
		}
		cowDir = fs.Dir()
		agentDir := filepath.Join(dataDir, "agent") // removed with dataDir
		if err := os.MkdirAll(agentDir, 0o755); err != nil {
			setupErr = err
			return
		}
		_ = os.Chmod(agentDir, 0o755)
		bin := filepath.Join(agentDir, "pandastack-guest")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/pandastack/pandastack/cmd/pandastack-guest")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			setupErr = errors.New(string(out))
			return
		}
		b, err := templates.New(templates.Config{DataDir: dataDir, CacheDir: cache, TemplateDir: filepath.Join(cowDir, "templates"), AgentPath: bin})
		if err != nil {
			setupErr = err
			return
		}
		drv, err := qemu.New(qemu.Config{Dir: filepath.Join(cowDir, "vms"), UIDBase: qemu.DefaultUIDBase})
		if err != nil {
			setupErr = err
			return
		}
		b.UseDriver(drv)
		tpl, err := b.Build(context.Background(), "minimal", discard{})
		if err != nil {
			setupErr = err
			return
		}
		snap, _, setupErr = b.Snapshot(context.Background(), "minimal@"+tpl.ID)
	})
	if setupErr != nil {
		t.Fatalf("bake minimal template: %v", setupErr)
	}
	return snap
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func newDriver(t *testing.T, dir string) *qemu.Driver {
	t.Helper()
	for p := dir; p != "/"; p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o711) // VM uids must reach it
	}
	d, err := qemu.New(qemu.Config{Dir: dir, UIDBase: qemu.DefaultUIDBase})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() }) // a test that fails half-way leaves no pool
	return d
}

// waitPool waits until the pool for snapshot key has n processes prepared
// (QEMU started, files mapped, QMP and the agent socket connected).
func waitPool(t *testing.T, d *qemu.Driver, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for d.PoolReady(key) < n {
		if time.Now().After(deadline) {
			t.Fatalf("pool did not fill: %d of %d ready", d.PoolReady(key), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func qemuPIDs(dir string) int { return len(qemuPIDList(dir)) }

// ping checks a restored VM's guest agent answers, and hangs up: QEMU
// serves one client at a time.
func ping(t *testing.T, v vmm.VM) {
	t.Helper()
	cl := agent(t, v)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRunsAsItsOwnUser(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	defer d.Close()
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	ping(t, v)
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(v.PID()), "status"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(st), "Uid:\t1500000") {
		t.Fatalf("qemu does not run as its own uid:\n%s", st)
	}
	if d.UID(v) < qemu.DefaultUIDBase {
		t.Fatalf("uid %d", d.UID(v))
	}
}

func TestFailedRestoreLeavesNothing(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	defer d.Close()
	bad := s
	state, _ := os.ReadFile(s.StateFile)
	bad.StateFile = filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(bad.StateFile, state[:len(state)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	bad.Key = "broken"
	if _, err := d.Restore(context.Background(), bad, vmm.RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "load state") {
		t.Fatalf("restore of a truncated state: %v, want a load state error", err)
	}
	time.Sleep(200 * time.Millisecond)
	if ids, _ := d.List(); len(ids) != 0 {
		t.Fatalf("vm dirs left: %v", ids)
	}
	if n := qemuPIDs(dir); n != 0 {
		t.Fatalf("%d qemu processes left", n)
	}
}

func TestRecoverAfterRestart(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d1 := newDriver(t, dir)
	v, err := d1.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	// The first "server" goes away: its connections close, the VM runs on.
	v.Release()
	// A new driver (as after a server restart) finds and re-attaches to it.
	d2 := newDriver(t, dir)
	defer d2.Close()
	ids, _ := d2.List()
	if len(ids) != 1 || ids[0] != v.ID() {
		t.Fatalf("list %v, want [%s]", ids, v.ID())
	}
	r, err := d2.Recover(context.Background(), v.ID())
	if err != nil {
		t.Fatal(err)
	}
	ping(t, r)
	if err := r.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Recover(context.Background(), v.ID()); !errors.Is(err, vmm.ErrGone) {
		t.Fatalf("recover of a killed vm: %v", err)
	}
	if ids, _ := d2.List(); len(ids) != 0 {
		t.Fatalf("vm dirs left: %v", ids)
	}
}

func TestPoolIsKilledOnClose(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	d.Prewarm(s, 2)
	waitPool(t, d, s.Key, 2)
	groups := d.CgroupGroupDirs()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if _, err := os.Stat(g); err == nil {
			t.Errorf("the driver's cgroup group %s is left after Close", g)
		}
	}
	if n := qemuPIDs(dir); n != 0 {
		t.Fatalf("%d pooled qemu processes left after Close", n)
	}
	if ids, _ := d.List(); len(ids) != 0 {
		t.Fatalf("vm dirs left: %v", ids)
	}
}

// TestPoolRefills checks the pool comes back to its size after restores
// take from it (a take that leaves one ready refills after a pause, one that
// empties it at once), and that a refill still pending when the driver
// closes starts nothing.
func TestPoolRefills(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	var vms []vmm.VM
	t.Cleanup(func() { // when the test fails half-way
		for _, v := range vms {
			v.Kill(context.Background())
		}
	})
	d.Prewarm(s, 2)
	waitReady := func(ready, procs int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for d.PoolReady(s.Key) != ready || qemuPIDs(dir) != procs {
			if time.Now().After(deadline) {
				t.Fatalf("%d ready in the pool and %d qemu processes, want %d and %d", d.PoolReady(s.Key), qemuPIDs(dir), ready, procs)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReady(2, 2)
	restore := func() {
		t.Helper()
		v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, v)
	}
	restore() // leaves one ready: refills after a pause
	if n := d.PoolReady(s.Key); n != 1 {
		t.Fatalf("%d ready right after a take from a pool of 2, want 1", n)
	}
	waitReady(2, 3)
	ping(t, vms[0])
	restore() // two in a row empty it: refills at once
	restore()
	waitReady(2, 5)
	for _, v := range vms {
		ping(t, v)
	}
	// A refill is pending when the driver closes.
	restore()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, v := range vms {
		if err := v.Kill(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // longer than the refill pause
	if n := qemuPIDs(dir); n != 0 {
		t.Fatalf("%d qemu processes left after Close and the kills", n)
	}
	if ids, _ := d.List(); len(ids) != 0 {
		t.Fatalf("vm dirs left: %v", ids)
	}
}

func TestSnapshotFilesAreSealed(t *testing.T) {
	s := template(t)
	for _, f := range []string{s.StateFile, s.Disk, s.MemFile} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o337 != 0 {
			t.Errorf("%s has mode %v: want it read-only, and not readable by others", f, st.Mode())
		}
	}
}

// agent opens a session with a restored VM's guest agent.
func agent(t *testing.T, v vmm.VM) *guestconn.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := v.(interface {
		AgentConn(context.Context) (net.Conn, error)
	}).AgentConn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cl, _, err := guestconn.NewConn(nc).Handshake(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// guestShUntil runs script as root in the guest until its output contains
// want (or 10 s pass) and returns the last output.
func guestShUntil(t *testing.T, cl *guestconn.Client, script, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var out strings.Builder
		_, err := cl.Exec(ctx, pandastack.ExecRequest{Args: []string{"/bin/sh", "-c", script}, User: "root"}, nil, func(ev pandastack.ExecEvent) error {
			if ev.Type == "stdout" {
				out.Write(ev.Data)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), want) || time.Now().After(deadline) {
			return out.String()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// blockDevices lists the guest's disks as "SERIAL SECTORS" lines.
const blockDevices = `for d in /sys/block/vd*; do echo "$(cat $d/serial 2>/dev/null) $(cat $d/size)"; done`

// A durable file in a volume slot is opened in place, and the restored
// guest sees its size (it saved the placeholder's), not a copy's.
func TestVolumeSlotShowsTheVolume(t *testing.T) {
	s := template(t)
	if s.Machine.VolumeSlots != vmm.VolumeSlots {
		t.Fatalf("template machine has %d volume slots, want %d", s.Machine.VolumeSlots, vmm.VolumeSlots)
	}
	dir := vmDir(t)
	d := newDriver(t, dir)
	defer d.Close()
	vol := filepath.Join(vmDir(t), "volume.raw")
	if err := os.WriteFile(vol, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(vol, 64<<20); err != nil {
		t.Fatal(err)
	}
	s.Volumes[1] = vmm.VolumeFile{Path: vol}
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) })
	got := guestShUntil(t, agent(t, v), blockDevices, "vol1 131072\n")
	if !strings.Contains(got, "vol1 131072\n") || !strings.Contains(got, "vol0 2048\n") {
		t.Fatalf("guest block devices (serial, 512-byte sectors):\n%s\nwant vol1 at 64 MiB and vol0 a 1 MiB placeholder", got)
	}
	if err := v.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(vol); err != nil || st.Size() != 64<<20 {
		t.Fatalf("the volume after the VM was killed: %v", err)
	}
}

// A volume copy (a fork's, a snapshot's) is cloned into a pooled process's
// placeholder: the guest sees the copy's size and bytes, and the source is
// untouched by its writes.
func TestVolumeCopyInPooledProcess(t *testing.T) {
	src := filepath.Join(vmDir(t), "vol0.raw")
	writeVolume(t, src, 0o400)
	restoreVolumeInPool(t, func(string) vmm.VolumeFile { return vmm.VolumeFile{Path: src, Copy: true} })
	if b, _ := os.ReadFile(src); !strings.HasPrefix(string(b), "volume bytes") {
		t.Fatalf("the guest's write reached the source of its copy: %q", b[:12])
	}
}

// TestSnapshotRestoresOntoItsOwnMachine: a snapshot restores onto the
// machine it was saved on, whatever this driver gives a machine it bakes.
// One saved with the PIT (every snapshot from before NoPIT under TCG)
// carries the PIT's state, which QEMU refuses to load into a machine
// without one; a hibernated sandbox or database saved before an upgrade
// must still wake. So must one saved before machines had a direct port.
func TestSnapshotRestoresOntoItsOwnMachine(t *testing.T) {
	s := template(t)
	d := newDriver(t, vmDir(t))
	ctx := context.Background()
	m := s.Machine
	m.NoPIT = !qemu.NoPIT(d.Accel()) // not the machine this driver bakes
	m.DirectPort = false             // nor has one saved before direct ports
	dir := vmDir(t)
	disk, mem := filepath.Join(dir, vmm.DiskFile), filepath.Join(dir, vmm.MemFile)
	if err := cowfs.Clone(disk, s.Disk, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := d.Boot(ctx, vmm.BootSpec{Machine: m, Disk: disk, MemFile: mem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Kill(context.Background()) }) // a failed check leaves no VM
	agent(t, v).Close()
	hasMachine(t, v, m)
	if err := v.SaveState(ctx, filepath.Join(dir, vmm.StateFile)); err != nil {
		t.Fatal(err)
	}
	// Saved means QEMU takes a cont again (Checkpoint's resume).
	if st := runState(t, v); st != "postmigrate" {
		t.Fatalf("after SaveState the run state is %q, want postmigrate", st)
	}
	if err := v.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := d.Restore(ctx, vmm.Saved(dir, m), vmm.RestoreOptions{})
	if err != nil {
		t.Fatalf("restore a snapshot saved with NoPIT %v: %v", m.NoPIT, err)
	}
	t.Cleanup(func() { r.Kill(context.Background()) })
	agent(t, r).Close()
	hasMachine(t, r, m)
	if _, err := r.(directConn).DirectConn(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("the direct port of a machine without one: %v, want ErrUnsupported", err)
	}
}

// hasMachine fails unless v's QEMU runs with a PIT and a direct port
// exactly when m has them.
func hasMachine(t *testing.T, v vmm.VM, m vmm.Machine) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", v.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if noPIT := strings.Contains(string(b), "pit=off"); noPIT != m.NoPIT {
		t.Fatalf("QEMU runs with pit=off %v; the machine says NoPIT %v", noPIT, m.NoPIT)
	}
	if direct := strings.Contains(string(b), "name=pandastack.direct"); direct != m.DirectPort {
		t.Fatalf("QEMU runs with a direct port %v; the machine says DirectPort %v", direct, m.DirectPort)
	}
}

// runState is v's QEMU run state.
func runState(t *testing.T, v vmm.VM) string {
	t.Helper()
	st, err := qemu.RunState(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
