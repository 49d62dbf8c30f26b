// Package guesttest runs the real guest agent (cmd/pandastack-guest) on
// this host for tests, unprivileged, serving a unix socket that stands in
// for a VM's virtio-serial port. Tests that need a guest get the real
// protocol and the real agent, not a fake.
package guesttest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/guestconn"
)

// buildMu keeps parallel tests from building the agent at the same time
// (the second waits and links from the cache).
var buildMu sync.Mutex

// Binary builds the guest agent into a directory that lives as long as the
// test t and returns its path. The Go build cache makes every build after
// the first a link.
func Binary(t testing.TB) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	bin := filepath.Join(t.TempDir(), "pandastack-guest")
	build := exec.Command("go", "build", "-o", bin, "github.com/pandastack/pandastack/cmd/pandastack-guest")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build guest agent: %v\n%s", err, out)
	}
	return bin
}

// Agent is one running guest agent process.
type Agent struct {
	Cmd *exec.Cmd
	// Conn is the host's end of the agent's port, not yet greeted (see
	// guestconn.NewConn and Conn.Handshake).
	Conn net.Conn
}

// Start runs the agent binary bin serving a fresh socket in dir and returns
// it connected. The agent ends when its connection closes; Stop ends it
// earlier.
func Start(ctx context.Context, bin, dir string) (*Agent, error) {
	sock := filepath.Join(dir, "port.sock")
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	defer os.Remove(sock)
	cmd := exec.Command(bin, "serve", "unix:"+sock)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() { c, err := ln.Accept(); ch <- accepted{c, err} }()
	select {
	case a := <-ch:
		if a.err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, a.err
		}
		return &Agent{Cmd: cmd, Conn: a.c}, nil
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, ctx.Err()
	}
}

// Stop ends the agent process and waits for it.
func (a *Agent) Stop() {
	a.Conn.Close()
	_ = a.Cmd.Process.Kill()
	_ = a.Cmd.Wait()
}

// Serve runs a fresh agent for t and returns its connection, not yet
// greeted; the agent is stopped when t ends.
func Serve(t testing.TB) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := Start(ctx, Binary(t), t.TempDir())
	if err != nil {
		t.Fatalf("start guest agent: %v", err)
	}
	t.Cleanup(a.Stop)
	return a.Conn
}

// Session runs a fresh agent for t and returns a session with it (the
// handshake done); both end when t ends.
func Session(t testing.TB) *guestconn.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, _, err := guestconn.NewConn(Serve(t)).Handshake(ctx)
	if err != nil {
		t.Fatalf("guest agent handshake: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}
