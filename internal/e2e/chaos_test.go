package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// chaosOps are the operations TestCrashChaos kills the server in the middle
// of, with the longest delay before the kill (they take about that long
// here, under TCG).
var chaosOps = []struct {
	name     string
	maxDelay time.Duration
}{
	{"create", 700 * time.Millisecond},
	{"fork", 900 * time.Millisecond},
	{"hibernate", 900 * time.Millisecond},
	{"wake", 900 * time.Millisecond},
	{"snapshot", 900 * time.Millisecond},
	{"volume", 1000 * time.Millisecond},
	{"build", 12 * time.Second},
}

// TestCrashChaos kills the server with SIGKILL at a random moment during a
// create, fork, hibernate, wake, snapshot, volume attach or template build,
// restarts it and checks after each restart: no sandbox left half made
// (each is running and answers, hibernated, or ended); every QEMU belongs
// to a VM directory and every VM directory to a QEMU; a network
// namespace and host link per QEMU (and no more than the spares); the VM filesystem mounted once; no
// half-written snapshot, hibernation, template or build step left; every
// listed snapshot restores (then it and the sandboxes are removed, so a
// long run stays within the team's quotas). At the end, once the server is
// stopped, nothing is left: no QEMU, namespace, link, nftables table
// or VM cgroup (issue 12 item 11).
//
// CI runs 14 kills (every operation twice, about a minute here);
// PANDASTACK_CHAOS_KILLS=100 runs the full count, PANDASTACK_CHAOS_SEED
// repeats a run's choices (the seed is logged).
func TestCrashChaos(t *testing.T) {
	ctx := context.Background()
	kills := 2 * len(chaosOps) // each operation twice
	if v := os.Getenv("PANDASTACK_CHAOS_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PANDASTACK_CHAOS_KILLS=%q: want a count", v)
		}
		kills = n
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv("PANDASTACK_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("chaos: %d kills, seed %d (PANDASTACK_CHAOS_SEED=%d repeats it)", kills, seed, seed)
	rng := rand.New(rand.NewSource(seed))

	s, dir := newTestServer(t, "ps-chaos-")
	defer func() { // the last one started on dir
		if s != nil {
			s.stop()
		}
	}()
	key, err := s.client(s.admin).CreateKey(ctx, "chaos", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	c := s.client(key.Key)
	vol, err := c.CreateVolume(ctx, "chaos", 64)
	if err != nil {
		t.Fatal(err)
	}
	_, ctxDir := writeContext(t, "", map[string]string{"ok.txt": "ok"})
	mounts := mountsUnder(dir)
	seen := map[string]bool{} // QEMU -names seen: none may keep a cgroup at the end
	restored := 0

	var order []int
	for i := 0; i < kills; i++ {
		if i%len(chaosOps) == 0 { // every operation once per round, in a random order
			order = rng.Perm(len(chaosOps))
		}
		op := chaosOps[order[i%len(chaosOps)]]
		run, err := chaosSetup(ctx, c, op.name, vol.ID, ctxDir, i)
		if err != nil {
			t.Fatalf("kill %d: set up %s: %v", i, op.name, err)
		}
		done := make(chan error, 1)
		go func() { done <- run() }()
		delay := time.Duration(rng.Int63n(int64(op.maxDelay)))
		select {
		case err := <-done:
			t.Logf("kill %d: %s finished (%v) before the kill at %v", i, op.name, err, delay)
			done <- err // for the wait below
		case <-time.After(delay):
		}
		for _, pid := range qemuProcesses(dir) {
			seen[argAfter(strings.Split(cmdline(pid), "\x00"), "-name")] = true
		}
		s.crash()
		t.Logf("kill %d: SIGKILL %v into %s", i, delay, op.name)
		<-done

		restarted, err := startServer(dir)
		if err != nil {
			s = nil
			t.Fatalf("kill %d: restart: %v", i, err)
		}
		s = restarted
		if err := s.waitTemplate(template, 10*time.Minute); err != nil {
			t.Fatalf("kill %d: restart: %v", i, err)
		}
		c = s.client(key.Key)
		when := fmt.Sprintf("after kill %d (%s)", i, op.name)
		chaosCheck(t, c, dir, mounts, when)
		restored += chaosTidy(t, c, when)
		if t.Failed() {
			t.Logf("server log:\n%s", s.tail())
			return
		}
	}
	t.Logf("%d snapshots listed after a kill restored", restored)

	// Once everything is ended and the server stopped, nothing is left.
	all, err := c.ListSandboxes(ctx, sdk.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range all {
		if err := sb.Kill(ctx); err != nil {
			t.Errorf("kill %s (%s): %v", sb.ID, sb.State, err)
		}
	}
	s.stop()
	if left := qemuProcesses(dir); len(left) > 0 {
		t.Errorf("QEMU processes left after the server stopped: %v", left)
	}
	if nss, links, tables, err := countNetObjects(dir); err != nil || nss+links+tables != 0 {
		t.Errorf("network left: %d namespaces, %d host links, %d nftables tables (%v)", nss, links, tables, err)
	}
	if d := vmDirs(dir); len(d) > 0 {
		t.Errorf("VM directories left: %v", d)
	}
	for name := range seen {
		for _, ctrl := range []string{"", "memory", "cpu", "pids"} {
			if m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctrl, "pandastack-vms", "*", name)); name != "" && len(m) > 0 {
				t.Errorf("cgroup left: %v", m)
			}
		}
	}
	// It starts again on what is left (and is stopped by the defer).
	if s, err = startServer(dir); err != nil {
		s = nil
		t.Fatal(err)
	}
}

// chaosSetup prepares operation op (outside the kill window) and returns
// the call the server is killed in.
func chaosSetup(ctx context.Context, c *sdk.Client, op, volID, ctxDir string, i int) (func() error, error) {
	running := func() (*sdk.Sandbox, error) {
		return c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 900})
	}
	switch op {
	case "create":
		return func() error { _, err := running(); return err }, nil
	case "fork":
		sb, err := running()
		if err != nil {
			return nil, err
		}
		return func() error { _, err := sb.Fork(ctx); return err }, nil
	case "hibernate":
		sb, err := running()
		if err != nil {
			return nil, err
		}
		return func() error { return sb.Hibernate(ctx) }, nil
	case "wake":
		sb, err := running()
		if err != nil {
			return nil, err
		}
		if err := sb.Hibernate(ctx); err != nil {
			return nil, err
		}
		return func() error { return sb.Wake(ctx) }, nil
	case "snapshot":
		sb, err := running()
		if err != nil {
			return nil, err
		}
		return func() error { _, err := sb.Snapshot(ctx, fmt.Sprintf("chaos-%d", i)); return err }, nil
	case "volume":
		// The volume is free again: whatever held it was killed first.
		all, _ := c.ListSandboxes(ctx, sdk.ListParams{})
		for _, sb := range all {
			if len(sb.Volumes) > 0 {
				_ = sb.Kill(ctx)
			}
		}
		return func() error {
			_, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: template, TTLSeconds: 900,
				Volumes: []sdk.VolumeMount{{Volume: volID, Path: "/data"}}})
			return err
		}, nil
	case "build":
		return func() error {
			_, _, err := c.BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: fmt.Sprintf("chaos-%d", i), ContextDir: ctxDir,
				Spec: []byte(fmt.Sprintf("FROM base\nCOPY ok.txt /ok.txt\nRUN echo %d > /chaos\n", i))})
			return err
		}, nil
	}
	return nil, fmt.Errorf("unknown operation %q", op)
}

// chaosTidy checks that every listed snapshot restores and answers, then
// deletes it and ends every sandbox, so that a long run stays within the
// team's quotas. It returns how many snapshots it restored.
func chaosTidy(t *testing.T, c *sdk.Client, when string) int {
	t.Helper()
	ctx := context.Background()
	snaps, err := c.ListSnapshots(ctx)
	if err != nil {
		t.Fatalf("%s: list snapshots: %v", when, err)
	}
	for _, sn := range snaps {
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: sn.ID, TTLSeconds: 300})
		if err != nil {
			t.Errorf("%s: snapshot %s (%s) does not restore: %v", when, sn.ID, sn.Name, err)
			continue
		}
		if r, err := sb.Exec(ctx, "echo restored", sdk.ExecOptions{TimeoutSeconds: 60}); err != nil || strings.TrimSpace(string(r.Stdout)) != "restored" {
			t.Errorf("%s: sandbox from snapshot %s: %v %+v", when, sn.ID, err, r)
		}
		if err := sb.Kill(ctx); err != nil {
			t.Errorf("%s: kill the sandbox from snapshot %s: %v", when, sn.ID, err)
		}
		if err := c.DeleteSnapshot(ctx, sn.ID); err != nil {
			t.Errorf("%s: delete snapshot %s: %v", when, sn.ID, err)
		}
	}
	live, err := c.ListSandboxes(ctx, sdk.ListParams{})
	if err != nil {
		t.Fatalf("%s: list sandboxes: %v", when, err)
	}
	for _, sb := range live {
		if err := sb.Kill(ctx); err != nil {
			t.Errorf("%s: kill %s (%s): %v", when, sb.ID, sb.State, err)
		}
	}
	return len(snaps)
}

// chaosCheck checks what must hold once a restarted server has settled.
func chaosCheck(t *testing.T, c *sdk.Client, dir string, mounts int, when string) {
	t.Helper()
	ctx := context.Background()
	var all []*sdk.Sandbox
	eventually(t, 2*time.Minute, when+": no sandbox left starting", func() bool {
		var err error
		all, err = c.ListSandboxes(ctx, sdk.ListParams{All: true})
		if err != nil {
			return false
		}
		for _, sb := range all {
			if sb.State == "starting" {
				return false
			}
		}
		return true
	})
	for _, sb := range all {
		switch sb.State {
		case "running":
			if !qemuRunning(vmPID(dir, sb.ID)) {
				t.Errorf("%s: sandbox %s is running without a QEMU", when, sb.ID)
				continue
			}
			ectx, cancel := context.WithTimeout(ctx, 90*time.Second)
			r, err := sb.Exec(ectx, "echo up", sdk.ExecOptions{TimeoutSeconds: 60})
			cancel()
			if err != nil || strings.TrimSpace(string(r.Stdout)) != "up" {
				t.Errorf("%s: running sandbox %s does not answer: %v %+v", when, sb.ID, err, r)
			}
		case "hibernated", "killed", "expired", "failed":
		default:
			t.Errorf("%s: sandbox %s is %q", when, sb.ID, sb.State)
		}
	}
	// QEMUs and VM directories match one to one, each QEMU with its
	// network: a pool refill may be half made for a moment, so this
	// must hold once the counts settle.
	why := chaosMismatch(dir)
	for deadline := time.Now().Add(time.Minute); why != "" && time.Now().Before(deadline); why = chaosMismatch(dir) {
		time.Sleep(200 * time.Millisecond)
	}
	if why != "" {
		t.Errorf("%s: %s", when, why)
	}
	if n := mountsUnder(dir); n != mounts {
		t.Errorf("%s: %d mounts under the data dir, want %d", when, n, mounts)
	}
	var tmps []string
	for _, pat := range []string{"cow/*/*.tmp", "cow/*/*/*.tmp", "steps/*.tmp"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		tmps = append(tmps, m...)
	}
	if len(tmps) > 0 {
		t.Errorf("%s: half-written files left: %v", when, tmps)
	}
}

// chaosSpares is how many namespaces the server keeps made ahead.
const chaosSpares = 4

// chaosMismatch says how QEMUs, VM directories and network namespaces
// disagree ("" when they match).
func chaosMismatch(dir string) string {
	pids := map[int]bool{}
	for _, pid := range qemuProcesses(dir) {
		pids[pid] = true
	}
	dirs := vmDirs(dir)
	for _, id := range dirs {
		pid := vmPID(dir, id)
		if !pids[pid] {
			return fmt.Sprintf("VM directory %s has no QEMU (pid %d)", id, pid)
		}
		delete(pids, pid)
	}
	if len(pids) > 0 {
		return fmt.Sprintf("QEMU processes without a VM directory: %v", pids)
	}
	nss, links, _, err := countNetObjects(dir)
	if err != nil {
		return err.Error()
	}
	// Every VM has its namespace, and up to chaosSpares more wait made
	// ahead (internal/network's default spares); each with its link.
	if nss != links || nss < len(dirs) || nss > len(dirs)+chaosSpares {
		return fmt.Sprintf("%d network namespaces and %d host links for %d VMs (and up to %d spares)", nss, links, len(dirs), chaosSpares)
	}
	return ""
}

// mountsUnder counts the mounts at or below dir.
func mountsUnder(dir string) int {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && (fs[4] == dir || strings.HasPrefix(fs[4], dir+"/")) {
			n++
		}
	}
	return n
}
