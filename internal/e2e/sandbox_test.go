package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func TestCreateExecFilesKill(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "lifecycle")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{Metadata: map[string]string{"task": "x"}, Env: map[string]string{"GREETING": "hi"}})
	if sb.State != "running" || sb.Accel == "" || sb.Template != template {
		t.Fatalf("created sandbox: %+v", sb)
	}

	t.Run("exec python from the template", func(t *testing.T) {
		r, err := sb.Exec(ctx, "python3 -c 'print(2 ** 10)'", sdk.ExecOptions{TimeoutSeconds: 60})
		if err != nil || string(r.Stdout) != "1024\n" || r.ExitCode != 0 {
			t.Fatalf("python: %v %+v", err, r)
		}
	})
	t.Run("node and git are installed", func(t *testing.T) {
		r, err := sb.Exec(ctx, "node -e 'console.log(6*7)' && git --version >/dev/null && echo ok", sdk.ExecOptions{TimeoutSeconds: 60})
		if err != nil || string(r.Stdout) != "42\nok\n" {
			t.Fatalf("node/git: %v %+v stderr=%s", err, r, r.Stderr)
		}
	})
	t.Run("env from create and from exec", func(t *testing.T) {
		r, err := sb.Exec(ctx, "echo $GREETING $EXTRA", sdk.ExecOptions{Env: map[string]string{"EXTRA": "there"}})
		if err != nil || string(r.Stdout) != "hi there\n" {
			t.Fatalf("env: %v %q", err, r.Stdout)
		}
	})
	t.Run("exit code, stderr, cwd, user", func(t *testing.T) {
		r, err := sb.Exec(ctx, "echo oops >&2; pwd; id -un; exit 3", sdk.ExecOptions{Cwd: "/tmp", User: "user"})
		if err != nil || r.ExitCode != 3 || string(r.Stderr) != "oops\n" || string(r.Stdout) != "/tmp\nuser\n" {
			t.Fatalf("got %v %+v", err, r)
		}
	})
	t.Run("commands run in bash", func(t *testing.T) {
		// What people paste from a terminal or E2B's docs: dash would print
		// "{a,b}" and fail on [[.
		r, err := sb.Exec(ctx, `echo {a,b}; [[ x == x ]] && printf '%s\x21\n' ok`, sdk.ExecOptions{})
		if err != nil || r.ExitCode != 0 || string(r.Stdout) != "a b\nok!\n" {
			t.Fatalf("bash syntax: %v %+v stderr=%s", err, r, r.Stderr)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		r, err := sb.Exec(ctx, "wc -c", sdk.ExecOptions{Stdin: []byte("12345")})
		if err != nil || strings.TrimSpace(string(r.Stdout)) != "5" {
			t.Fatalf("stdin: %v %q", err, r.Stdout)
		}
	})
	t.Run("streamed output arrives while the command runs", func(t *testing.T) {
		// Judged against the end of the command, not a wall clock: the
		// first line must arrive well before the one that follows a sleep.
		first := make(chan time.Time, 1)
		_, err := sb.Exec(ctx, "echo one; sleep 1.5; echo two", sdk.ExecOptions{OnStdout: func(b []byte) {
			select {
			case first <- time.Now():
			default:
			}
		}})
		end := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if d := end.Sub(<-first); d < 1*time.Second {
			t.Fatalf("first output arrived only %v before the end: not streamed", d)
		}
	})
	t.Run("binary and invalid UTF-8 output", func(t *testing.T) {
		r, err := sb.Exec(ctx, `printf '\377\376\000abc\300'`, sdk.ExecOptions{})
		if err != nil || !bytes.Equal(r.Stdout, []byte("\xff\xfe\x00abc\xc0")) {
			t.Fatalf("binary: %v %q", err, r.Stdout)
		}
	})
	t.Run("files round trip", func(t *testing.T) {
		fs := sb.Files()
		if _, err := fs.Write(ctx, "/work/out.txt", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		b, err := fs.Read(ctx, "/work/out.txt")
		if err != nil || string(b) != "hello" {
			t.Fatalf("read: %v %q", err, b)
		}
		r, _ := sb.Exec(ctx, "cat /work/out.txt", sdk.ExecOptions{})
		if string(r.Stdout) != "hello" {
			t.Fatalf("the guest sees %q", r.Stdout)
		}
		if err := fs.MakeDir(ctx, "/work/d/e"); err != nil {
			t.Fatal(err)
		}
		if err := fs.Rename(ctx, "/work/out.txt", "/work/d/e/moved.txt"); err != nil {
			t.Fatal(err)
		}
		ents, err := fs.List(ctx, "/work/d/e")
		if err != nil || len(ents) != 1 || ents[0].Name != "moved.txt" || ents[0].Size != 5 {
			t.Fatalf("list: %v %+v", err, ents)
		}
		if ok, _ := fs.Exists(ctx, "/work/d/e/moved.txt"); !ok {
			t.Fatal("exists says no")
		}
		if err := fs.Remove(ctx, "/work/d", true); err != nil {
			t.Fatal(err)
		}
		if ok, _ := fs.Exists(ctx, "/work/d"); ok {
			t.Fatal("removed directory still exists")
		}
	})
	t.Run("large file streams both ways", func(t *testing.T) {
		data := make([]byte, 64<<20)
		rand.Read(data)
		sum := sha256.Sum256(data)
		if _, err := sb.Files().WriteFrom(ctx, "/tmp/big.bin", bytes.NewReader(data), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := sb.Exec(ctx, "sha256sum /tmp/big.bin | cut -d' ' -f1", sdk.ExecOptions{TimeoutSeconds: 120})
		if err != nil || strings.TrimSpace(string(r.Stdout)) != hex.EncodeToString(sum[:]) {
			t.Fatalf("guest checksum %q err %v", r.Stdout, err)
		}
		h := sha256.New()
		n, err := sb.Files().ReadTo(ctx, "/tmp/big.bin", h)
		if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), sum[:]) {
			t.Fatalf("download: %v, %d bytes, checksum match %v", err, n, bytes.Equal(h.Sum(nil), sum[:]))
		}
	})
	t.Run("listed by metadata", func(t *testing.T) {
		l, err := c.ListSandboxes(ctx, sdk.ListParams{Metadata: map[string]string{"task": "x"}})
		if err != nil || len(l) != 1 || l[0].ID != sb.ID {
			t.Fatalf("list: %v %v", err, l)
		}
		l, _ = c.ListSandboxes(ctx, sdk.ListParams{Metadata: map[string]string{"task": "y"}})
		if len(l) != 0 {
			t.Fatalf("filter task=y matched %d", len(l))
		}
	})
	t.Run("kill frees the VM and later calls answer gone", func(t *testing.T) {
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); !sdk.IsGone(err) {
			t.Fatalf("exec after kill: %v, want gone", err)
		}
		got, err := c.GetSandbox(ctx, sb.ID)
		if err != nil || got.State != "killed" || got.EndedAt == nil {
			t.Fatalf("after kill: %v %+v", err, got)
		}
		for _, d := range vmDirs(main.dataDir) {
			if d == sb.ID {
				t.Fatalf("vm dir %s left after kill", d)
			}
		}
		if err := sb.Kill(ctx); err != nil {
			t.Fatalf("second kill: %v", err)
		}
	})
}

func TestClonesAreIndependent(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "clones")
	a := newSandbox(t, c, sdk.CreateSandboxParams{})
	b := newSandbox(t, c, sdk.CreateSandboxParams{})
	// Each restore reseeds the RNG and steps the clock.
	ra, _ := a.Exec(ctx, "head -c 16 /dev/urandom | od -An -tx1; cat /proc/sys/kernel/random/uuid", sdk.ExecOptions{})
	rb, _ := b.Exec(ctx, "head -c 16 /dev/urandom | od -An -tx1; cat /proc/sys/kernel/random/uuid", sdk.ExecOptions{})
	if bytes.Equal(ra.Stdout, rb.Stdout) || len(ra.Stdout) < 32 {
		t.Fatalf("two clones produced the same random bytes: %q", ra.Stdout)
	}
	r, _ := a.Exec(ctx, "date +%s", sdk.ExecOptions{})
	var guestNow int64
	fmt.Sscan(string(r.Stdout), &guestNow)
	if d := time.Now().Unix() - guestNow; d > 5 || d < -5 {
		t.Fatalf("guest clock off by %d s after restore", d)
	}
	// A write in one clone is not seen by the other.
	if _, err := a.Files().Write(ctx, "/root/only-in-a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Files().Exists(ctx, "/root/only-in-a"); ok {
		t.Fatal("a file written in one sandbox appeared in another")
	}
}

func TestBackgroundProcesses(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "background")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	pid, err := sb.StartBackground(ctx, "echo ready; trap 'echo stopping; exit 0' TERM; while :; do sleep 0.1; done", sdk.ExecOptions{})
	if err != nil || pid <= 0 {
		t.Fatalf("start background: %v %d", err, pid)
	}
	eventually(t, 10*time.Second, "background process listed", func() bool {
		ps, err := sb.Processes(ctx)
		if err != nil {
			return false
		}
		for _, p := range ps {
			if p.PID == pid && p.Running {
				return true
			}
		}
		return false
	})
	go func() {
		time.Sleep(time.Second)
		_ = sb.Signal(ctx, pid, "TERM")
	}()
	r, err := sb.Attach(ctx, pid, sdk.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Stdout) != "ready\nstopping\n" || r.ExitCode != 0 {
		t.Fatalf("attach: %q exit %d", r.Stdout, r.ExitCode)
	}
}

func TestTimeoutKillsProcessTree(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "timeouts")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	t0 := time.Now()
	r, err := sb.Exec(ctx, "(sleep 300 &) ; setsid sleep 300 & sleep 300", sdk.ExecOptions{TimeoutSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !r.TimedOut || r.ExitCode != 137 {
		t.Fatalf("result %+v, want timed out with 137", r)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	eventually(t, 5*time.Second, "no sleep left in the guest", func() bool {
		r, err := sb.Exec(ctx, "pgrep -x sleep || true", sdk.ExecOptions{})
		return err == nil && len(bytes.TrimSpace(r.Stdout)) == 0
	})
}

func TestTTLExpiry(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "ttl")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{TTLSeconds: 2})
	if _, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "sandbox to expire", func() bool {
		got, err := c.GetSandbox(ctx, sb.ID)
		return err == nil && got.State == "expired"
	})
	if _, err := sb.Exec(ctx, "true", sdk.ExecOptions{}); !sdk.IsGone(err) {
		t.Fatalf("exec after expiry: %v, want gone", err)
	}
	for _, d := range vmDirs(main.dataDir) {
		if d == sb.ID {
			t.Fatalf("vm dir left after expiry")
		}
	}
	// Extending the TTL of a live sandbox keeps it past its first expiry.
	sb2 := newSandbox(t, c, sdk.CreateSandboxParams{TTLSeconds: 2})
	if err := sb2.SetTTL(ctx, 60); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if _, err := sb2.Exec(ctx, "true", sdk.ExecOptions{}); err != nil {
		t.Fatalf("exec after extending the TTL: %v", err)
	}
}

func TestLargeOutput(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "output")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	var n int
	h := sha256.New()
	r, err := sb.Exec(ctx, "head -c 52428800 /dev/zero | tr '\\0' 'x'", sdk.ExecOptions{TimeoutSeconds: 300, DiscardOutput: true,
		OnStdout: func(b []byte) { n += len(b); h.Write(b) }})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("streamed 50 MB: %v %+v", err, r)
	}
	want := sha256.Sum256(bytes.Repeat([]byte("x"), 50<<20))
	if n != 50<<20 || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("got %d bytes (checksum ok: %v)", n, bytes.Equal(h.Sum(nil), want[:]))
	}
	// The sandbox is still fine afterwards.
	if r, err := sb.Exec(ctx, "echo alive", sdk.ExecOptions{}); err != nil || string(r.Stdout) != "alive\n" {
		t.Fatalf("after large output: %v", err)
	}
}

// repeatReader yields n bytes: one random block over and over.
type repeatReader struct {
	block []byte
	left  int64
	off   int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	n := copy(p, r.block[r.off:])
	if int64(n) > r.left {
		n = int(r.left)
	}
	r.off = (r.off + n) % len(r.block)
	r.left -= int64(n)
	return n, nil
}

func TestOneGiBFile(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "bigfile")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	block := make([]byte, 1<<20)
	rand.Read(block)
	const size = 1 << 30
	h := sha256.New()
	io.Copy(h, &repeatReader{block: block, left: size})
	want := hex.EncodeToString(h.Sum(nil))
	t0 := time.Now()
	if _, err := sb.Files().WriteFrom(ctx, "/root/big.bin", &repeatReader{block: block, left: size}, 0o644); err != nil {
		t.Fatal(err)
	}
	up := time.Since(t0)
	r, err := sb.Exec(ctx, "sha256sum /root/big.bin | cut -d' ' -f1", sdk.ExecOptions{TimeoutSeconds: 300})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != want {
		t.Fatalf("guest checksum %q, want %s (%v)", r.Stdout, want, err)
	}
	h.Reset()
	t0 = time.Now()
	n, err := sb.Files().ReadTo(ctx, "/root/big.bin", h)
	if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != want {
		t.Fatalf("download: %v, %d bytes", err, n)
	}
	t.Logf("1 GiB up %v (%.0f MB/s), down %v (%.0f MB/s)", up, size/up.Seconds()/1e6, time.Since(t0), size/time.Since(t0).Seconds()/1e6)
}
