// Package e2e runs PandaStack end to end: the real pandastack binary as a
// server, real QEMU microVMs (TCG where KVM does not work), the real guest
// agent, driven through the Go SDK and raw HTTP like a user would.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/network"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// template is what the suite creates sandboxes from: the product's default.
const template = "base"

var (
	binDir   string // built pandastack and pandastack-guest
	cacheDir string // build cache shared by every server of the suite
	main     *serverProc
)

// serverProc is a running `pandastack server`.
type serverProc struct {
	cmd     *exec.Cmd
	dataDir string
	url     string
	tlsAddr string // the SNI listener (--tls-listen)
	dbAddr  string // the database router (--db-listen)
	admin   string
	log     string
	exited  chan struct{}
}

func TestMain(m *testing.M) {
	if os.Getuid() != 0 {
		fmt.Println("SKIP: the end-to-end suite needs root (QEMU VMs run as their own uids; debootstrap); CI runs it as root")
		os.Exit(0)
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	if os.Getuid() != 0 {
		return 1, fmt.Errorf("the end-to-end suite needs root (QEMU VMs run as their own uids; debootstrap)")
	}
	var err error
	if binDir, err = os.MkdirTemp("", "pandastack-e2e-bin-"); err != nil {
		return 1, err
	}
	defer os.RemoveAll(binDir)
	for _, b := range []string{"pandastack", "pandastack-guest"} {
		// -trimpath and no VCS stamp: the same source gives the same agent
		// binary whatever directory or commit it was built from, so
		// templates baked from it stay cached across runs (the build key
		// hashes the agent).
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", filepath.Join(binDir, b), "github.com/pandastack/pandastack/cmd/"+b)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 1, fmt.Errorf("build %s: %v\n%s", b, err, out)
		}
	}
	// The Node shim's hello addon, beside the agent (as scripts/setup
	// builds it): fresh Node invocations do the restore's hello in the shim.
	cmd := exec.Command("../../scripts/build-node-hello", filepath.Join(binDir, "pandastack-node-hello.node"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return 1, fmt.Errorf("build the Node hello addon: %v\n%s", err, out)
	}
	_ = os.Chmod(binDir, 0o755)
	cacheDir = os.Getenv("PANDASTACK_E2E_CACHE")
	if cacheDir == "" {
		cacheDir = filepath.Join(os.TempDir(), "pandastack-e2e-cache")
	}
	sweepStale(cacheDir)
	dataDir, err := os.MkdirTemp("", "ps-e2e-")
	if err != nil {
		return 1, err
	}
	defer removeDataDir(dataDir)
	if outside, err = startOutside(); err != nil {
		return 1, err
	}
	defer outside.close()
	main, err = startServer(dataDir, "--dns-upstream", outside.dns)
	if err != nil {
		return 1, err
	}
	if err := main.waitTemplate(template, 50*time.Minute); err != nil {
		main.stop()
		return 1, err
	}
	code := m.Run()
	main.stop()
	if leaked := qemuProcesses(dataDir); len(leaked) > 0 {
		return 1, fmt.Errorf("QEMU processes left after the server stopped: %v", leaked)
	}
	// Every test ended its sandboxes, so the server left no network behind.
	if nss, links, tables, err := countNetObjects(dataDir); err != nil || nss+links+tables != 0 {
		return 1, fmt.Errorf("network left after the server stopped with no sandboxes: %d namespaces, %d host links, %d nftables tables (%v)", nss, links, tables, err)
	}
	return code, nil
}

// newTestServer starts a server of the test's own on a fresh data dir and
// waits for the suite's template. The data dir is removed (its VM storage
// unmounted) when the test ends; stopping the server — or the one the test
// restarts on dir — is the test's.
func newTestServer(t *testing.T, prefix string, extra ...string) (*serverProc, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		removeDataDir(dir)
		reportLeakedNetwork(t, dir)
	})
	_ = os.Chmod(dir, 0o711)
	s, err := startServer(dir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.waitTemplate(template, 20*time.Minute); err != nil {
		s.stop()
		t.Fatal(err)
	}
	return s, dir
}

// removeDataDir removes a server's data dir, unmounting its VM storage.
func removeDataDir(dir string) {
	// A test that failed half-way may have left its server's VMs running
	// (a server stops without ending them, to re-attach them later): end
	// them, so no QEMU outlives the files it maps.
	for _, pid := range qemuProcesses(dir) {
		fmt.Fprintf(os.Stderr, "e2e: ending QEMU %d left under %s\n", pid, dir)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 50 && len(qemuProcesses(dir)) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if nss, links, tables, err := countNetObjects(dir); err == nil && nss+links+tables > 0 {
		fmt.Fprintf(os.Stderr, "e2e: removing the network left by the server on %s: %d namespaces, %d host links, %d tables\n", dir, nss, links, tables)
		removeNetObjects(dir)
	}
	if err := cowfs.Unmount(filepath.Join(dir, "cow")); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
	}
	os.RemoveAll(dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startServer runs `pandastack server` on dataDir and waits for /v1/health.
// The ports it listens on are picked free, then given up for the server
// to bind: another process can take one in between (seen once: the
// database router's port), so a start that failed on a port in use is
// tried again on fresh ports.
func startServer(dataDir string, extra ...string) (*serverProc, error) {
	for try := 1; ; try++ {
		s, err := startServerOnce(dataDir, extra...)
		if err == nil || try == 3 || !strings.Contains(err.Error(), "address already in use") {
			return s, err
		}
	}
}

func startServerOnce(dataDir string, extra ...string) (*serverProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	tlsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dbPort, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dataDir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append([]string{"server", "--data-dir", dataDir, "--cache-dir", cacheDir,
		"--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--tls-listen", fmt.Sprintf("127.0.0.1:%d", tlsPort), "--templates", template, "--pool", "2",
		// The suite's git servers listen on 127.0.0.1 (git daemon); every
		// other address of this machine stays closed to app clones.
		"--git-allow-cidrs", "127.0.0.1/32",
		"--db-listen", fmt.Sprintf("127.0.0.1:%d", dbPort)}, append(hostCAArgs(), extra...)...)
	cmd := exec.Command(filepath.Join(binDir, "pandastack"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &serverProc{cmd: cmd, dataDir: dataDir, url: fmt.Sprintf("http://127.0.0.1:%d", port),
		tlsAddr: fmt.Sprintf("127.0.0.1:%d", tlsPort), dbAddr: fmt.Sprintf("127.0.0.1:%d", dbPort), log: logPath, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := http.Get(s.url + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("server exited at start:\n%s", s.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("server did not answer health:\n%s", s.tail())
		}
	}
	b, err := os.ReadFile(filepath.Join(dataDir, "admin-key"))
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("admin key: %w", err)
	}
	s.admin = strings.TrimSpace(string(b))
	return s, nil
}

// waitTemplate waits until the server lists the template as built.
func (s *serverProc) waitTemplate(name string, limit time.Duration) error {
	c := s.client(s.admin)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ts, err := c.Templates(context.Background())
		if err == nil {
			for _, t := range ts {
				if t.Name == name {
					return nil
				}
			}
		}
		if strings.Contains(s.tail(), "template build failed") {
			return fmt.Errorf("template build failed:\n%s", s.tail())
		}
		select {
		case <-s.exited:
			return fmt.Errorf("server exited while building %s:\n%s", name, s.tail())
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("template %s not built within %v:\n%s", name, limit, s.tail())
}

func (s *serverProc) client(key string) *sdk.Client {
	return sdk.NewClient(sdk.WithBaseURL(s.url), sdk.WithAPIKey(key))
}

// stop ends the server gracefully (its sandboxes keep running unless it
// was started with --kill-on-exit).
func (s *serverProc) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// crash kills the server without warning.
func (s *serverProc) crash() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

func (s *serverProc) tail() string {
	f, err := os.Open(s.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 40 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// qemuProcesses lists QEMU processes whose VM lives under dataDir.
func qemuProcesses(dataDir string) []int {
	return processesWhere(func(cl string) bool {
		return strings.Contains(cl, "qemu-system") && strings.Contains(cl, dataDir+"/")
	})
}

// processesWhere lists the pids whose command line (NUL-separated) match
// accepts.
func processesWhere(match func(cmdline string) bool) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !match(string(b)) {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// vmPID is the pid of the QEMU running machine id, from its VM directory's
// record (a pooled QEMU keeps the name it was started with, not the id of
// the machine that took it), or 0 when there is none.
func vmPID(dataDir, id string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "cow", "vms", id, "vm.json"))
	if err != nil {
		return 0
	}
	var m struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(b, &m) != nil {
		return 0
	}
	return m.PID
}

// qemuRunning reports whether process pid is (still) a QEMU.
func qemuRunning(pid int) bool { return pid > 0 && strings.Contains(cmdline(pid), "qemu-system") }

// checkParked checks that hibernated sandbox id's QEMU, pid, is parked: it
// is kept in the driver's .park- directory (so a wake soon continues it)
// and its guest is stopped — the process uses no CPU.
func checkParked(t *testing.T, dataDir, id string, pid int) {
	t.Helper()
	if !qemuRunning(pid) {
		t.Fatalf("hibernated %s: its QEMU (pid %d) is not parked but gone", id, pid)
	}
	if got := vmPID(dataDir, ".park-"+id); got != pid {
		t.Fatalf("hibernated %s: the parked directory records pid %d, want %d", id, got, pid)
	}
	if got := vmPID(dataDir, id); got != 0 {
		t.Fatalf("hibernated %s: its VM directory is still there (pid %d)", id, got)
	}
	a := cpuTicks(pid)
	time.Sleep(2 * time.Second)
	if b := cpuTicks(pid); b-a > 2 {
		t.Fatalf("hibernated %s: its parked QEMU used %d CPU ticks in 2 s, want none", id, b-a)
	}
}

// vmDirs lists the VM directories of a server.
func vmDirs(dataDir string) []string {
	ents, _ := os.ReadDir(filepath.Join(dataDir, "cow", "vms"))
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// teamClient makes a key for a new team and returns a client using it.
func teamClient(t *testing.T, team string) *sdk.Client {
	t.Helper()
	k, err := main.client(main.admin).CreateKey(context.Background(), team, "e2e")
	if err != nil {
		t.Fatalf("create key for %s: %v", team, err)
	}
	return main.client(k.Key)
}

// newSandbox creates a sandbox that is killed when the test ends.
func newSandbox(t *testing.T, c *sdk.Client, p sdk.CreateSandboxParams) *sdk.Sandbox {
	t.Helper()
	if p.Template == "" {
		p.Template = template
	}
	if p.TTLSeconds == 0 {
		p.TTLSeconds = 600
	}
	sb, err := c.CreateSandbox(context.Background(), p)
	if err != nil {
		t.Fatalf("create sandbox: %v", err)
	}
	t.Cleanup(func() { _ = sb.Kill(context.Background()) })
	return sb
}

// eventually retries cond until it holds or the limit passes.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return string(b)
}

// dirEntries is the set of names in dir.
func dirEntries(dir string) map[string]bool {
	set := map[string]bool{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		set[e.Name()] = true
	}
	return set
}

// newEntries lists the names in dir that were not in before.
func newEntries(dir string, before map[string]bool) []string {
	var extra []string
	for name := range dirEntries(dir) {
		if !before[name] {
			extra = append(extra, name)
		}
	}
	return extra
}

// ptr is a pointer to v (for the SDK's optional fields).
func ptr[T any](v T) *T { return &v }

// reportLeakedNetwork names the test whose server left network objects
// behind once it stopped (a CI run left one namespace and its nftables
// table without saying whose), and removes them so the next tests and the
// suite's own count start clean.
func reportLeakedNetwork(t *testing.T, dir string) {
	nss, links, tables, err := countNetObjects(dir)
	if err != nil || nss+links+tables == 0 {
		return
	}
	msg := fmt.Sprintf("e2e: LEAK: %s's server (%s) left %d namespaces, %d host links and %d nftables tables after it stopped; removing them",
		t.Name(), dir, nss, links, tables)
	t.Log(msg)
	fmt.Fprintln(os.Stderr, msg)
	prefix := network.Prefix(dir)
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
	if out, err := exec.Command("ip", "-br", "link").Output(); err == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], prefix+"h") {
				_ = exec.Command("ip", "link", "del", strings.SplitN(f[0], "@", 2)[0]).Run()
			}
		}
	}
	_ = exec.Command("nft", "delete", "table", "ip", "pandastack_"+prefix).Run()
}
