package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cacerts"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/network"
	"github.com/pandastack/pandastack/internal/templates"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
	"golang.org/x/sys/unix"
)

// probeNpmPackage is what the build VM installs from the registry: small,
// pinned, without dependencies.
const probeNpmPackage, probeNpmVersion = "is-number", "7.0.0"

// A catalog template's build steps run inside a build VM, not on the host:
// a step that reports where it runs sees the guest's PID 1 and kernel and
// uid 0; writes aimed at host paths (directly, and through /proc/1/root,
// the way out of a chroot) land in the guest; an npm package's install
// script runs there too; and an npm install from the registry works through
// the build VM's network with the extra CA certificates trusted. The
// template's sandboxes have what the steps installed, none of the build's
// CA files or npm cache, and a second build with the same steps runs none
// of them. The template is a test-only definition on base's root
// filesystem, so its image is base's, cached by the suite.
func TestCatalogStepsRunInBuildVM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "ps-e2e-buildvm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeDataDir(dir); reportLeakedNetwork(t, dir) })
	_ = os.Chmod(dir, 0o711)
	// The build log; named like a server's so the suite's sweep finds a
	// directory a killed run left.
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	log := slog.New(slog.NewTextHandler(logf, nil))

	cow, err := cowfs.Open(ctx, filepath.Join(dir, "cow"), cowfs.Options{Size: 24 << 30, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	nw, err := network.New(ctx, network.Config{DataDir: dir, Spares: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nw.Close() })
	// uids of their own: the suite's servers start at DefaultUIDBase.
	drv, err := qemu.New(qemu.Config{Dir: filepath.Join(cow.Dir(), "vms"), UIDBase: qemu.DefaultUIDBase + 50_000, Network: nw, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	var extraCA []byte
	if files := hostCAFiles(); len(files) > 0 {
		if extraCA, err = cacerts.Load(files); err != nil {
			t.Fatal(err)
		}
	}
	b, err := templates.New(templates.Config{DataDir: dir, CacheDir: cacheDir, TemplateDir: filepath.Join(cow.Dir(), "templates"),
		AgentPath: filepath.Join(binDir, "pandastack-guest"), Logger: log, ExtraCA: extraCA})
	if err != nil {
		t.Fatal(err)
	}
	b.UseDriver(drv)

	// Host paths the steps aim at: fresh ones, so the steps (and the
	// image they make) are new every run.
	hostDir := filepath.Join(dir, "host")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	direct, viaProc1, viaScript := filepath.Join(hostDir, "direct"), filepath.Join(hostDir, "proc1root"), filepath.Join(hostDir, "postinstall")
	pkg := fmt.Sprintf(`{"name":"pandastack-probe","version":"1.0.0","scripts":{"postinstall":"{ id -u; cat /proc/1/comm; uname -r; } > /pandastack-postinstall; mkdir -p %[1]s && echo touched > /proc/1/root%[2]s && cat %[2]s > /pandastack-postinstall-wrote"}}`,
		hostDir, viaScript)
	def := templates.Catalog["base"]
	def.Name, def.Warm = "buildvm-probe", ""
	def.Steps = []string{
		"{ id -u; cat /proc/1/comm; uname -r; } > /pandastack-where",
		// (The guest's /tmp is a tmpfs: what the writes left is copied to
		// its disk to be seen in the template.)
		fmt.Sprintf("mkdir -p %[1]s && echo touched > %[2]s && echo touched > /proc/1/root%[3]s && cat %[2]s %[3]s > /pandastack-wrote",
			hostDir, direct, viaProc1),
		// A local package whose install script runs where npm runs.
		fmt.Sprintf("mkdir -p /tmp/probe && cd /tmp/probe && cat > package.json <<'EOF'\n%s\nEOF\nnpm pack --silent && npm install -g --no-audit --no-fund ./pandastack-probe-1.0.0.tgz && rm -rf /tmp/probe", pkg),
		fmt.Sprintf("npm install -g --no-audit --no-fund %s@%s", probeNpmPackage, probeNpmVersion),
	}

	var progress bytes.Buffer
	t0 := time.Now()
	tpl, err := b.BuildDef(ctx, def, &progress)
	logf.Write(progress.Bytes())
	if err != nil {
		t.Fatalf("build: %v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("built %s in %v (steps and bake)", tpl.ID, time.Since(t0).Round(time.Millisecond))
	out := progress.String()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "build steps: done") || strings.HasPrefix(l, "guest agent answered") {
			t.Log(l)
		}
	}
	for n := 1; n <= 5; n++ {
		if !strings.Contains(out, fmt.Sprintf("[%d/5] ", n)) {
			t.Errorf("progress lacks its [%d/5] line:\n%s", n, out)
		}
	}
	for i := range def.Steps {
		if !strings.Contains(out, fmt.Sprintf("step %d/%d (in the build VM)", i+1, len(def.Steps))) {
			t.Errorf("progress does not show step %d running in the build VM:\n%s", i+1, out)
		}
	}
	// The step image is new every run (its steps name fresh paths): it
	// goes when the test ends.
	if rec, err := os.ReadFile(filepath.Join(cow.Dir(), "templates", def.Name, tpl.ID, "template.json")); err == nil {
		var r struct{ Image string }
		if json.Unmarshal(rec, &r) == nil && strings.HasPrefix(r.Image, filepath.Join(cacheDir, "images")+"/") {
			t.Cleanup(func() { os.Remove(r.Image) })
		}
	}

	// Nothing the steps wrote reached the host.
	for _, p := range []string{direct, viaProc1, viaScript} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("a build step wrote %s on the host", p)
		}
	}

	// What the steps left is in the template: restore it and look.
	snap, _, err := b.Snapshot(ctx, def.Name+"@"+tpl.ID)
	if err != nil {
		t.Fatal(err)
	}
	v, err := drv.Restore(ctx, snap, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Kill(context.Background())
	cl := guestClient(t, v)
	guestOut := func(cmd string) string {
		t.Helper()
		var o bytes.Buffer
		res, err := cl.Exec(ctx, pandastack.ExecRequest{Args: []string{"/bin/sh", "-c", cmd}, TimeoutSeconds: 120}, nil, func(ev pandastack.ExecEvent) error {
			if ev.Type == "stdout" || ev.Type == "stderr" {
				o.Write(ev.Data)
			}
			return nil
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("in the template's VM, %s: exit %d, %v\n%s", cmd, res.ExitCode, err, o.String())
		}
		return strings.TrimSpace(o.String())
	}
	guest := guestOut("{ id -u; cat /proc/1/comm; uname -r; }")
	var host unix.Utsname
	_ = unix.Uname(&host)
	hostComm, _ := os.ReadFile("/proc/1/comm")
	hostID := fmt.Sprintf("%s/%s", strings.TrimSpace(string(hostComm)), unix.ByteSliceToString(host.Release[:]))
	for _, f := range []string{"/pandastack-where", "/pandastack-postinstall"} {
		got := guestOut("cat " + f)
		if got != guest {
			t.Errorf("%s: the step ran as uid, under PID 1 and kernel %q; the guest is %q (the host: %s)", f, got, guest, hostID)
		}
		if !strings.HasPrefix(got, "0\n") {
			t.Errorf("%s: the step did not run as root: %q", f, got)
		}
	}
	if lines := strings.Split(guest, "\n"); len(lines) == 3 && lines[1]+"/"+lines[2] == hostID {
		t.Errorf("the guest's PID 1 and kernel are the host's (%s): this test cannot tell them apart", hostID)
	}
	// The writes aimed at the host are in the guest.
	if got := guestOut("cat /pandastack-wrote /pandastack-postinstall-wrote"); got != "touched\ntouched\ntouched" {
		t.Errorf("the writes at host paths, read back in the build VM: %q", got)
	}
	// The registry install worked, and the build left no CA file or npm
	// cache behind.
	if got := guestOut(fmt.Sprintf("node -p \"require('/usr/local/lib/node_modules/%s/package.json').version\"", probeNpmPackage)); got != probeNpmVersion {
		t.Errorf("%s from the registry: version %q, want %s", probeNpmPackage, got, probeNpmVersion)
	}
	if got := guestOut("ls -d /tmp/.pandastack-build-* /root/.npm /tmp/probe 2>/dev/null || true"); got != "" {
		t.Errorf("the build left %q in the image", got)
	}
	cl.Close()
	v.Kill(ctx)

	// Unchanged steps: nothing is built again.
	progress.Reset()
	again, err := b.BuildDef(ctx, def, &progress)
	logf.Write(progress.Bytes())
	if err != nil {
		t.Fatalf("rebuild: %v\n%s", err, progress.String())
	}
	out = progress.String()
	if again.ID != tpl.ID || !strings.Contains(out, "build steps: cached") || strings.Contains(out, "in the build VM") ||
		!strings.Contains(out, "cached: ") || !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, "[5/5] ") }) {
		t.Errorf("a rebuild with unchanged steps built something (build %s, then %s):\n%s", tpl.ID, again.ID, out)
	}
}

// guestClient connects to a restored VM's guest agent.
func guestClient(t *testing.T, v vmm.VM) *guestconn.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	return cl
}
