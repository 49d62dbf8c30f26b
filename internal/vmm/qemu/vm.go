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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack/internal/vmm"
)

// meta is what a VM directory records about its process, for Recover.
type meta struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	UID     int       `json:"uid"`
	Snap    string    `json:"snapshot,omitempty"`
	Started time.Time `json:"started"`
}

// vm is one QEMU process.
type vm struct {
	d      *Driver
	id     string
	dir    string
	uid    int
	pid    int
	cmd    *exec.Cmd // nil for a recovered VM
	q      *qmp
	exited chan struct{}

	mu        sync.Mutex
	agent     net.Conn // connected before the state load, handed out once
	killed    bool
	stateFile *os.File
}

func (v *vm) ID() string              { return v.id }
func (v *vm) Dir() string             { return v.dir }
func (v *vm) PID() int                { return v.pid }
func (v *vm) AgentSocket() string     { return filepath.Join(v.dir, agentSock) }
func (v *vm) Exited() <-chan struct{} { return v.exited }

// AgentConn returns the agent connection made while the VM was prepared, or
// a new one.
func (v *vm) AgentConn(ctx context.Context) (net.Conn, error) {
	v.mu.Lock()
	c := v.agent
	v.agent = nil
	v.mu.Unlock()
	if c != nil {
		return c, nil
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", v.AgentSocket())
}

// start launches QEMU with args as the VM's unprivileged user.
func (d *Driver) start(ctx context.Context, id string, args []string, snapKey string) (*vm, error) {
	dir := filepath.Join(d.cfg.Dir, id)
	if len(filepath.Join(dir, agentSock)) > 107 {
		return nil, fmt.Errorf("vm directory %s is too long for a unix socket path", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create vm dir: %w", err)
	}
	uid := d.allocUID()
	v := &vm{d: d, id: id, dir: dir, uid: uid, exited: make(chan struct{})}
	if uid > 0 {
		if err := os.Chown(dir, uid, uid); err != nil {
			d.releaseUID(uid)
			return nil, fmt.Errorf("chown vm dir: %w", err)
		}
	}
	logf, err := os.OpenFile(filepath.Join(dir, qemuLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		d.releaseUID(uid)
		return nil, fmt.Errorf("create qemu log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(d.cfg.Binary, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if uid > 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: d.groups}
	}
	if err := cmd.Start(); err != nil {
		d.releaseUID(uid)
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	v.cmd, v.pid = cmd, cmd.Process.Pid
	go func() { _ = cmd.Wait(); close(v.exited) }()
	m := meta{ID: id, PID: v.pid, UID: uid, Snap: snapKey, Started: time.Now().UTC()}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, metaFile), b, 0o600); err != nil {
		v.Kill(context.Background())
		return nil, fmt.Errorf("write vm meta: %w", err)
	}
	v.q, err = dialQMP(ctx, filepath.Join(dir, qmpSock), v.exited)
	if err != nil {
		err = fmt.Errorf("%w: %s", err, v.logTail())
		v.Kill(context.Background())
		return nil, err
	}
	return v, nil
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
// passed descriptor (QEMU's seccomp policy forbids exec: migration).
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
			return f.Sync()
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

// Release drops the QMP and agent connections; the VM keeps running.
func (v *vm) Release() {
	v.mu.Lock()
	if v.agent != nil {
		v.agent.Close()
		v.agent = nil
	}
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
	if v.agent != nil {
		v.agent.Close()
		v.agent = nil
	}
	if v.stateFile != nil {
		v.stateFile.Close()
	}
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
			var st struct {
				Status string `json:"status"`
			}
			if err := v.q.run(ctx, "query-status", nil, &st); err != nil {
				return err
			}
			if st.Status != "inmigrate" {
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
