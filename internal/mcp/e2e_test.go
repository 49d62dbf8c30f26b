package mcp_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/mcp"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// e2eTimeout bounds each answer from a real server (the first tool call
// boots a microVM).
const e2eTimeout = 2 * time.Minute

// lockedBuffer collects a subprocess's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildPandastack builds cmd/pandastack into a temporary directory.
func buildPandastack(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	bin := filepath.Join(t.TempDir(), "pandastack")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/pandastack/pandastack/cmd/pandastack")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// mcpProcess is `pandastack mcp` running as a subprocess.
type mcpProcess struct {
	c      *rpcClient
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	stderr *lockedBuffer
	exited chan error
}

func startMCPProcess(t *testing.T, bin string) *mcpProcess {
	t.Helper()
	p := &mcpProcess{stderr: &lockedBuffer{}, exited: make(chan error, 1)}
	p.cmd = exec.Command(bin, "mcp", "-v")
	p.cmd.Stderr = p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	go func() { p.exited <- p.cmd.Wait() }()
	p.c = newRPCClient(t, stdin, stdout, e2eTimeout)
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			p.cmd.Process.Kill()
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("pandastack mcp stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// closeAndWait closes stdin and checks the process exits 0.
func (p *mcpProcess) closeAndWait(t *testing.T) {
	t.Helper()
	p.stdin.Close()
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("pandastack mcp exited with %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("pandastack mcp did not exit after stdin closed")
	}
}

// sandboxState asks the real server for a sandbox's state.
func sandboxState(t *testing.T, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sb, err := sdk.NewClient().GetSandbox(ctx, id)
	if err != nil {
		t.Fatalf("get sandbox %s: %v", id, err)
	}
	return sb.State
}

// TestE2E runs the real `pandastack mcp` against the real server named by
// PANDASTACK_BASE_URL and PANDASTACK_API_KEY (see scripts/with-server).
func TestE2E(t *testing.T) {
	if os.Getenv("PANDASTACK_BASE_URL") == "" || os.Getenv("PANDASTACK_API_KEY") == "" {
		t.Skip("end-to-end test: needs PANDASTACK_BASE_URL and PANDASTACK_API_KEY of a running server (scripts/with-server)")
	}
	bin := buildPandastack(t)

	t.Run("session", func(t *testing.T) {
		p := startMCPProcess(t, bin)
		c := p.c
		if res := c.initialize(mcp.ProtocolVersion); res["protocolVersion"] != mcp.ProtocolVersion {
			t.Fatalf("initialize: %v", res)
		}
		checkToolList(t, c)

		text := c.mustTool("exec", map[string]any{"command": "python3 -c 'print(6*7)'"})
		id := match(t, startedRE, text)
		if !strings.Contains(text, "exit_code: 0") || !strings.Contains(text, "\n42\n") {
			t.Errorf("exec python3: %s", text)
		}
		t.Logf("exec:\n%s", text)

		steps := []struct {
			name, tool string
			args       map[string]any
			isError    bool
			want       string
		}{
			{"non-zero exit", "exec", map[string]any{"command": "echo oops >&2; exit 4"}, true, "exit_code: 4"},
			{"stderr", "exec", map[string]any{"command": "echo oops >&2; exit 4"}, true, "--- stderr (5 bytes) ---\noops\n"},
			{"timeout", "exec", map[string]any{"command": "sleep 30", "timeout_seconds": 1}, true, "timed_out: true"},
			{"write_file", "write_file", map[string]any{"path": "/tmp/mcp.txt", "content": "héllo from mcp\n"}, false, "wrote 16 bytes to /tmp/mcp.txt"},
			{"read_file", "read_file", map[string]any{"path": "/tmp/mcp.txt"}, false, "héllo from mcp\n"},
			{"file is there for exec", "exec", map[string]any{"command": "cat /tmp/mcp.txt", "cwd": "/tmp"}, false, "héllo from mcp"},
			{"list_files", "list_files", map[string]any{"path": "/tmp"}, false, "mcp.txt"},
			{"binary file", "read_file", map[string]any{"path": "/bin/sh"}, false, "not valid UTF-8"},
			{"missing file", "read_file", map[string]any{"path": "/nonexistent"}, true, "not_found"},
			{"fork", "fork", map[string]any{}, false, "forked sandbox"},
		}
		for _, s := range steps {
			t.Run(s.name, func(t *testing.T) {
				c.t = t
				defer func() { c.t = nil }()
				text, isErr := c.callTool(s.tool, s.args)
				if isErr != s.isError || !strings.Contains(text, s.want) {
					t.Errorf("isError %v, want %v; text does not contain %q?\n%.3000s", isErr, s.isError, s.want, text)
				}
				if s.tool == "fork" {
					t.Logf("fork: %s", text)
				}
			})
		}
		c.t = t

		text = c.mustTool("kill", map[string]any{})
		if !strings.Contains(text, "killed sandbox "+id) {
			t.Errorf("kill: %s", text)
		}
		if s := sandboxState(t, id); s != "killed" {
			t.Errorf("after kill the sandbox is %s", s)
		}
		p.closeAndWait(t)
	})

	t.Run("SIGINT kills the sandbox", func(t *testing.T) {
		p := startMCPProcess(t, bin)
		p.c.initialize(mcp.ProtocolVersion)
		id := match(t, startedRE, p.c.mustTool("exec", map[string]any{"command": "true"}))
		if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			if err != nil {
				t.Fatalf("after SIGINT pandastack mcp exited with %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("pandastack mcp did not exit after SIGINT")
		}
		if s := sandboxState(t, id); s != "killed" {
			t.Errorf("after SIGINT the sandbox is %s, want killed", s)
		}
	})

	t.Run("EOF kills the sandbox", func(t *testing.T) {
		p := startMCPProcess(t, bin)
		p.c.initialize("2024-11-05")
		id := match(t, idRE, p.c.mustTool("sandbox_create", map[string]any{"ttl_seconds": 300}))
		p.c.mustTool("exec", map[string]any{"command": "true"})
		p.closeAndWait(t)
		if s := sandboxState(t, id); s != "killed" {
			t.Errorf("after EOF the sandbox is %s, want killed", s)
		}
	})
}
