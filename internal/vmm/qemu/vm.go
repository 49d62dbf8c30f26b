package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/jail"
	"github.com/pandastack/pandastack/internal/vmm"
)

// vmNice is the scheduling niceness of VM processes.
const vmNice = 19

// meta is what a VM directory records about its process, for Recover.
type meta struct {
	ID      string      `json:"id"`
	Name    string      `json:"name,omitempty"` // QEMU's -name: the id it was started under
	PID     int         `json:"pid"`
	UID     int         `json:"uid"`
	Snap    string      `json:"snapshot,omitempty"`
	Machine vmm.Machine `json:"machine"`
	Started time.Time   `json:"started"`
	// Volumes: the durable volume in each slot ("" for a file of the VM's
	// own); Copies: which of its own slot files are volume copies.
	Volumes [vmm.VolumeSlots]string `json:"volumes"`
	Copies  [vmm.VolumeSlots]bool   `json:"copies"`
}

func (m meta) name() string {
	if m.Name != "" {
		return m.Name
	}
	return m.ID
}

// vm is one QEMU process.
type vm struct {
	d        *Driver
	id       string
	name     string // QEMU's -name (the id it was started under)
	dir      string
	mem      string // RAM file, mapped shared
	disk     string // root disk file
	diskSize int64
	loaded   string // snapshot files the RAM and disk were cloned from at prepare
	machine  vmm.Machine
	// vols[i] is the durable volume open in slot i ("" when the slot's
	// file is the VM's own, dir/volN.raw); copies[i]: that own file is a
	// volume copy, not a placeholder.
	vols    [vmm.VolumeSlots]string
	copies  [vmm.VolumeSlots]bool
	snapKey string
	uid     int
	pid     int
	cmd     *exec.Cmd // nil for a recovered VM
	q       *qmp
	exited  chan struct{}
	// noNet: started without the host's network (a bench floor, see
	// floor.go): there is nothing to release when it ends.
	noNet bool
	// started is when its QEMU process was executed.
	started time.Time
	// settled is set once Settle put on its caps.
	settled atomic.Bool

	mu     sync.Mutex
	agent  net.Conn // connected before the state load, handed out once
	direct net.Conn // the same for the direct port, when the machine has one
	killed bool
}

func (v *vm) ID() string              { return v.id }
func (v *vm) Dir() string             { return v.dir }
func (v *vm) PID() int                { return v.pid }
func (v *vm) AgentSocket() string     { return filepath.Join(v.dir, agentSock) }
func (v *vm) Exited() <-chan struct{} { return v.exited }

// AgentConn returns the agent connection made while the VM was prepared, or
// a new one.
func (v *vm) AgentConn(ctx context.Context) (net.Conn, error) {
	return v.takeOrDial(ctx, &v.agent, agentSock)
}

// DirectConn returns the connection to the machine's direct port
// (vmm.Machine.DirectPort) made while the VM was prepared, or a new one;
// errors.ErrUnsupported when the machine has no such port. The port has
// one host at a time: a second connection waits until the first closes.
func (v *vm) DirectConn(ctx context.Context) (net.Conn, error) {
	if !v.machine.DirectPort {
		return nil, fmt.Errorf("vm %s: %w: its machine has no direct port", v.id, errors.ErrUnsupported)
	}
	return v.takeOrDial(ctx, &v.direct, directSock)
}

// takeOrDial hands out the connection made ahead in *ahead (once), or
// connects to the VM's socket named sock.
func (v *vm) takeOrDial(ctx context.Context, ahead *net.Conn, sock string) (net.Conn, error) {
	v.mu.Lock()
	c := *ahead
	*ahead = nil
	dir := v.dir
	v.mu.Unlock()
	if c != nil {
		return c, nil
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", filepath.Join(dir, sock))
}

// dropConns closes the connections made ahead and not handed out.
// Called with v.mu held.
func (v *vm) dropConns() {
	for _, c := range []*net.Conn{&v.agent, &v.direct} {
		if *c != nil {
			(*c).Close()
			*c = nil
		}
	}
}

// start launches QEMU with args as the VM's unprivileged user, jailed when
// the driver jails VMs (jail.go). uid comes from allocUID (0: run as the
// caller); start owns it from here (released on failure or when the VM
// ends). files are passed to QEMU as fds 3, 4, ...; f names the files it
// opens by path.
func (d *Driver) start(ctx context.Context, id string, uid int, args []string, snapKey string, m vmm.Machine, f vmFiles, files ...*os.File) (*vm, error) {
	return d.startVM(ctx, id, uid, args, snapKey, m, true, f, files...)
}

// startVM is start; without withNet the VM's NIC gets no host side even
// when the driver has a network.
func (d *Driver) startVM(ctx context.Context, id string, uid int, args []string, snapKey string, m vmm.Machine, withNet bool, f vmFiles, files ...*os.File) (*vm, error) {
	dir := filepath.Join(d.cfg.Dir, id)
	if len(filepath.Join(dir, agentSock)) > 107 {
		d.releaseUID(uid)
		return nil, fmt.Errorf("vm directory %s is too long for a unix socket path", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		d.releaseUID(uid)
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	v := &vm{d: d, id: id, name: id, dir: dir, uid: uid, snapKey: snapKey, machine: m, exited: make(chan struct{}), noNet: !withNet}
	jailed := d.jailed && uid > 0
	if uid > 0 && !jailed {
		// Unjailed, QEMU makes its sockets and serial log itself.
		if err := os.Chown(dir, uid, uid); err != nil {
			d.releaseUID(uid)
			return nil, fmt.Errorf("chown vm dir: %w", err)
		}
	}
	logf, err := jail.OpenBeneath(dir, qemuLog, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		d.releaseUID(uid)
		return nil, fmt.Errorf("create qemu log: %w", err)
	}
	defer logf.Close()
	var cmd *exec.Cmd
	if jailed {
		var sockets []*os.File
		cmd, sockets, err = d.jailCommand(v, uid, args, f, len(files))
		if err != nil {
			d.releaseUID(uid)
			return nil, fmt.Errorf("jail qemu: %w", err)
		}
		defer closeAll(sockets) // QEMU has its own copies
		files = append(append([]*os.File(nil), files...), sockets...)
	} else {
		// Guest CPUs yield to the host's own work, above all to the kernel
		// threads that serve their RAM and disk files' page faults: nice
		// runs QEMU (and every thread it makes) at vmNice.
		cmd = exec.Command(d.nice, append(append([]string{"-n", fmt.Sprint(vmNice), d.cfg.Binary}, args...), socketArgs(dir, m, -1)...)...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if uid > 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: d.groups}
		}
	}
	cmd.ExtraFiles = files
	cmd.Stdout, cmd.Stderr = logf, logf
	if withNet && d.cfg.Network != nil {
		tap, err := d.cfg.Network.Attach(ctx, id)
		if err != nil {
			d.releaseUID(uid)
			v.releaseCgroup()
			return nil, fmt.Errorf("attach network: %w", err)
		}
		defer tap.Close() // QEMU has its own copy
		cmd.Args = append(cmd.Args, nicArgs(3+len(cmd.ExtraFiles))...)
		cmd.ExtraFiles = append(cmd.ExtraFiles, tap)
	} else {
		cmd.Args = append(cmd.Args, nicArgs(-1)...)
	}
	v.started = time.Now()
	if err := cmd.Start(); err != nil {
		d.releaseUID(uid)
		v.releaseNet()
		v.releaseCgroup()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	v.cmd, v.pid = cmd, cmd.Process.Pid
	// The network goes with the process, however it ends (kill, hibernate,
	// crash), before anyone waiting on exited is told. It is keyed by the
	// VM's first id, its QEMU -name, which a rename does not change.
	go func() { _ = cmd.Wait(); v.releaseNet(); v.releaseCgroup(); close(v.exited) }()
	if err := v.writeMeta(); err != nil {
		v.Kill(context.Background())
		return nil, err
	}
	v.q, err = dialQMP(ctx, filepath.Join(dir, qmpSock), v.exited)
	if err != nil {
		err = fmt.Errorf("%w: %s", err, v.logTail())
		v.Kill(context.Background())
		return nil, err
	}
	return v, nil
}

// writeMeta records what Recover needs to find the process again.
func (v *vm) writeMeta() error {
	m := meta{ID: v.id, Name: v.name, PID: v.pid, UID: v.uid, Snap: v.snapKey, Machine: v.machine, Started: time.Now().UTC(),
		Volumes: v.vols, Copies: v.copies}
	b, _ := json.Marshal(m)
	tmp := filepath.Join(v.dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write vm meta: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, metaFile)); err != nil {
		return fmt.Errorf("write vm meta: %w", err)
	}
	return nil
}

// rename gives a prepared VM another id: its directory moves (the sockets
// in it go along: they are found by inode) and its record is rewritten.
func (v *vm) rename(id string) error {
	dir := filepath.Join(v.d.cfg.Dir, id)
	if len(filepath.Join(dir, agentSock)) > 107 {
		return fmt.Errorf("vm directory %s is too long for a unix socket path", dir)
	}
	if err := os.Rename(v.dir, dir); err != nil {
		return fmt.Errorf("rename vm %s to %s: %w", v.id, id, err)
	}
	if v.d.cfg.Network != nil {
		if err := v.d.cfg.Network.Rename(context.Background(), v.id, id); err != nil {
			_ = os.Rename(dir, v.dir)
			return err
		}
	}
	v.mu.Lock()
	v.id, v.dir = id, dir
	v.mu.Unlock()
	v.mem, v.disk = filepath.Join(dir, vmm.MemFile), filepath.Join(dir, vmm.DiskFile)
	return v.writeMeta()
}

// netID is the id the VM's network is attached under: its current id.
func (v *vm) netID() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.id
}

// releaseNet removes the VM's network, if it has one.
func (v *vm) releaseNet() {
	if !v.noNet {
		v.d.releaseNet(v.netID())
	}
}

// releaseNet removes a VM's network, if the driver gives VMs one.
func (d *Driver) releaseNet(id string) {
	if d.cfg.Network == nil {
		return
	}
	if err := d.cfg.Network.Release(context.Background(), id); err != nil {
		d.log.Warn("release vm network", "vm", id, "err", err)
	}
}

// logTail returns the end of QEMU's own output, for error messages.
func (v *vm) logTail() string {
	b, _ := os.ReadFile(filepath.Join(v.dir, qemuLog))
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}

// SaveState stops the guest and streams its device state into path through a
// passed descriptor (QEMU's seccomp policy forbids exec: migration). The
// file is not fsynced (see vmm.VM).
func (v *vm) SaveState(ctx context.Context, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create state file: %w", err)
	}
	defer f.Close()
	caps := map[string]any{"capabilities": []map[string]any{{"capability": "x-ignore-shared", "state": true}}}
	if err := v.q.run(ctx, "migrate-set-capabilities", caps, nil); err != nil {
		return err
	}
	if err := v.q.run(ctx, "stop", nil, nil); err != nil {
		return err
	}
	if err := v.q.runFD(ctx, "getfd", map[string]any{"fdname": "state"}, nil, int(f.Fd())); err != nil {
		return err
	}
	if err := v.q.run(ctx, "migrate", map[string]any{"uri": "fd:state"}, nil); err != nil {
		return err
	}
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := v.q.run(ctx, "query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			// Not fsynced: the guest is paused, and on a loop-mounted
			// image a flush writes back all the image has dirty. Callers
			// that keep the state make it durable once the VM runs on.
			return v.awaitPostMigrate(ctx)
		case "failed", "cancelled":
			return fmt.Errorf("save state: migration %s: %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// awaitPostMigrate waits for QEMU's run state to leave finish-migrate.
// query-migrate says completed as soon as the migration thread has set
// it, before that thread takes the lock to move the run state on to
// postmigrate; a cont in between fails with "Migration is not finalized
// yet" (a snapshot of an app's build machine failed so under load).
func (v *vm) awaitPostMigrate(ctx context.Context) error {
	for {
		st, err := v.runState(ctx)
		if err != nil {
			return err
		}
		if st != "finish-migrate" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// runState is QEMU's run state, as query-status says it (running,
// inmigrate, finish-migrate, postmigrate, paused, ...).
func (v *vm) runState(ctx context.Context) (string, error) {
	var st struct {
		Status string `json:"status"`
	}
	err := v.q.run(ctx, "query-status", nil, &st)
	return st.Status, err
}

// slotFile is the file in volume slot i, and whether it holds a volume
// (durable or a copy) rather than a placeholder.
func (v *vm) slotFile(i int) (string, bool) {
	if v.vols[i] != "" {
		return v.vols[i], true
	}
	v.mu.Lock()
	dir := v.dir
	v.mu.Unlock()
	return filepath.Join(dir, vmm.VolumeFileName(i)), v.copies[i]
}

// Release drops the QMP and agent connections; the VM keeps running.
func (v *vm) Release() {
	v.mu.Lock()
	v.dropConns()
	v.mu.Unlock()
	if v.q != nil {
		v.q.close()
	}
}

// Kill ends the process and removes the VM's directory.
func (v *vm) Kill(ctx context.Context) error {
	v.mu.Lock()
	if v.killed {
		v.mu.Unlock()
		<-v.exited
		return nil
	}
	v.killed = true
	v.dropConns()
	v.mu.Unlock()
	if v.q != nil {
		v.q.close()
	}
	_ = syscall.Kill(v.pid, syscall.SIGKILL)
	select {
	case <-v.exited:
	case <-ctx.Done():
		return fmt.Errorf("kill vm %s: %w", v.id, ctx.Err())
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kill vm %s: process %d did not exit", v.id, v.pid)
	}
	v.d.releaseUID(v.uid)
	v.releaseNet() // a recovered VM is not our child: its exit released nothing
	v.releaseCgroup()
	if err := os.RemoveAll(v.dir); err != nil {
		return fmt.Errorf("remove vm dir: %w", err)
	}
	return nil
}

// watchPID closes exited when a process that is not our child ends.
func watchPID(pid int, exited chan struct{}) error {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return err
	}
	go func() {
		defer unix.Close(fd)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
				break
			}
			if fds[0].Revents != 0 {
				break
			}
		}
		close(exited)
	}()
	return nil
}

// waitIncoming waits until QEMU has loaded the incoming state.
func (v *vm) waitIncoming(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case ev := <-v.q.events:
			if ev.Name != "MIGRATION" {
				continue
			}
			var d struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			switch d.Status {
			case "completed":
				return nil
			case "failed", "cancelled":
				return fmt.Errorf("incoming migration %s", d.Status)
			}
		case <-poll.C: // in case an event was missed
			st, err := v.runState(ctx)
			if err != nil {
				return err
			}
			if st != "inmigrate" {
				return nil
			}
		case <-v.exited:
			return vmmGone()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func vmmGone() error { return fmt.Errorf("qemu exited: %w", vmm.ErrGone) }
