package templates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/guestimage"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// Config configures a Builder.
type Config struct {
	DataDir  string // default home of the two directories below
	CacheDir string // kernel, root filesystem and image layers; default DataDir/cache
	// TemplateDir holds baked templates; default DataDir/templates. It must
	// be on the VM driver's copy-on-write filesystem (restores reflink from
	// it).
	TemplateDir string
	Driver      vmm.Driver
	AgentPath   string // the pandastack-guest binary (static)
	Logger      *slog.Logger
	// MaxSizeVariants bounds the size variants kept of each template
	// build (0: DefaultMaxSizeVariants; below 0: no bound).
	MaxSizeVariants int
	// ExtraCA is PEM the build VMs of catalog Steps trust while the steps
	// run (the server's --extra-ca-certs: an HTTPS proxy's CA); nil: none.
	ExtraCA []byte
}

// Builder builds templates: the host half of templates (the registry, in
// the store, numbers and names them; see refs.go). It implements
// pandastack.TemplateBuilder.
type Builder struct {
	cfg   Config
	log   *slog.Logger
	refs  Refs
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// diskSizes caches the virtual size of template disks, by path.
	diskSizes map[string]int
	// usedAt is when each size variant was last handed out (variants.go).
	usedAt map[string]time.Time
}

var _ pandastack.TemplateBuilder = (*Builder)(nil)

// New makes a Builder.
func New(cfg Config) (*Builder, error) {
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(cfg.DataDir, "cache")
	}
	if cfg.TemplateDir == "" {
		cfg.TemplateDir = filepath.Join(cfg.DataDir, "templates")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := os.Stat(cfg.AgentPath); err != nil {
		return nil, fmt.Errorf("guest agent binary: %w", err)
	}
	for _, d := range []string{cfg.CacheDir, cfg.TemplateDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	b := &Builder{cfg: cfg, log: cfg.Logger, locks: map[string]*sync.Mutex{}}
	b.cleanInterrupted()
	return b, nil
}

func (b *Builder) lock(name string) func() {
	b.mu.Lock()
	l := b.locks[name]
	if l == nil {
		l = &sync.Mutex{}
		b.locks[name] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func hashOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

func fileHash(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// UseDriver sets the VMM driver bakes run on (it is chosen after probing
// with the boot files this Builder makes).
func (b *Builder) UseDriver(d vmm.Driver) { b.cfg.Driver = d }

// Boot is what a guest boots with: kernel, initramfs and their keys.
type Boot struct {
	Kernel    guestimage.Kernel
	Initrd    string
	InitrdKey string
	AgentHash string
}

// BootFiles fetches the kernel and makes the initramfs (both cached).
func (b *Builder) BootFiles(ctx context.Context, progress io.Writer) (Boot, error) {
	var bt Boot
	k, err := guestimage.FetchKernel(ctx, b.cfg.CacheDir, progress)
	if err != nil {
		return bt, fmt.Errorf("fetch kernel: %w", err)
	}
	bt.Kernel = k
	if bt.AgentHash, err = fileHash(b.cfg.AgentPath); err != nil {
		return bt, fmt.Errorf("hash guest agent: %w", err)
	}
	bt.InitrdKey = hashOf("initrd", k.Package, bt.AgentHash, strings.Join(Modules, ","))
	bt.Initrd = filepath.Join(b.cfg.CacheDir, "initrd", bt.InitrdKey+".img")
	if _, err := os.Stat(bt.Initrd); err == nil {
		return bt, nil
	}
	mods, err := k.ResolveModules(Modules)
	if err != nil {
		return bt, fmt.Errorf("resolve modules: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(bt.Initrd), 0o755); err != nil {
		return bt, err
	}
	if err := guestimage.WriteInitramfs(bt.Initrd, b.cfg.AgentPath, mods); err != nil {
		return bt, fmt.Errorf("write initramfs: %w", err)
	}
	return bt, nil
}

// layout is the version of a baked template's files: a template baked in
// another layout is baked again. 4: every VM has volume slots (vmm.VolumeSlots).
// 5: a machine's direct port (vmm.Machine.DirectPort) has its host connected
// when the bake is saved, as every restore connects it: the restored guest
// sees no change of its host (a control message and a wake-up of the port's
// reader, on every create's path).
const layout = 5

// record is template.json in a baked template's directory.
type record struct {
	Template pandastack.Template `json:"template"`
	Machine  vmm.Machine         `json:"machine"`
	Disk     string              `json:"disk"`  // the template's disk (raw), in its directory
	Image    string              `json:"image"` // the disk image the bake booted from
	Layout   int                 `json:"layout"`
	ColdBoot float64             `json:"cold_boot_ms"`
}

func (b *Builder) dir(name, id string) string {
	return filepath.Join(b.cfg.TemplateDir, name, id)
}

// Build makes (or finds) the baked catalog template name; the registry
// records it as a version.
func (b *Builder) Build(ctx context.Context, name string, progress io.Writer) (pandastack.Template, error) {
	def, ok := Catalog[name]
	if !ok {
		return pandastack.Template{}, pandastack.Errorf(pandastack.ENotFound, "no template named %q in the catalog (known: %s)", name, catalogNames())
	}
	return b.BuildDef(ctx, def, progress)
}

// BuildDef makes (or finds) the baked template def: Build for a recipe that
// is not in the catalog (tests build their own).
func (b *Builder) BuildDef(ctx context.Context, def Def, progress io.Writer) (pandastack.Template, error) {
	name := def.Name
	defer b.lock(name)()
	t0 := time.Now()
	step := func(n int, what string) { fmt.Fprintf(progress, "[%d/5] %s\n", n, what) }
	step(1, "kernel and initramfs")
	bt, err := b.BootFiles(ctx, progress)
	if err != nil {
		return pandastack.Template{}, err
	}
	step(2, "root filesystem (debootstrap "+def.Rootfs.Suite+")")
	rootfs, err := guestimage.BuildRootfs(ctx, b.cfg.CacheDir, def.Rootfs, progress)
	if err != nil {
		return pandastack.Template{}, fmt.Errorf("build root filesystem: %w", err)
	}
	step(3, "disk image")
	extra := map[string]string{"/usr/sbin/pandastack-guest": b.cfg.AgentPath}
	keyParts := []string{"image", def.Rootfs.Key(), bt.AgentHash, fmt.Sprint(def.DiskMiB)}
	if wantsNode(def) {
		keyParts = append(keyParts, "node", Node.Version, Node.Integrity)
	}
	if len(def.Files) > 0 {
		fk, err := b.stageFiles(def.Files, extra)
		if err != nil {
			return pandastack.Template{}, err
		}
		keyParts = append(keyParts, fk)
	}
	imgKey := hashOf(keyParts...)
	img := filepath.Join(b.cfg.CacheDir, "images", imgKey+".raw")
	if _, err := os.Stat(img); err != nil {
		if err := os.MkdirAll(filepath.Dir(img), 0o755); err != nil {
			return pandastack.Template{}, err
		}
		if wantsNode(def) {
			// Only here: a cached image needs the pin, not the binary.
			node, err := b.nodeBinary(ctx, progress)
			if err != nil {
				return pandastack.Template{}, fmt.Errorf("fetch Node.js %s: %w", Node.Version, err)
			}
			extra[NodePath] = node
		}
		if _, err := guestimage.WriteExt4(ctx, img, rootfs, extra, def.DiskMiB); err != nil {
			return pandastack.Template{}, fmt.Errorf("write disk image: %w", err)
		}
		_ = os.Chmod(img, 0o444)
	} else {
		// Its modification time says when a bake last used it, for
		// whatever prunes the cache.
		now := time.Now()
		_ = os.Chtimes(img, now, now)
	}
	if len(def.Steps) > 0 {
		// The image the steps leave, run in a build VM (buildvm.go).
		if img, imgKey, err = b.stepImage(ctx, def, img, imgKey, bt, progress); err != nil {
			return pandastack.Template{}, err
		}
	}
	m := b.machine(def, bt)
	id := hashOf("bake", fmt.Sprint(layout), imgKey, bt.InitrdKey, bt.Kernel.Package, fmt.Sprint(m.CPUs, m.CPUModel, m.MemoryMiB, m.Cmdline, m.NoPIT, m.FreePageReporting, m.DirectPort), string(b.cfg.Driver.Accel()), qemuVersion(), def.Warm)
	dir := b.dir(name, id)
	step(4, "bake (cold boot, then save the VM)")
	rec, err := readRecord(dir)
	if err == nil && rec.Layout != layout {
		err = fmt.Errorf("template %s was baked in an older layout", dir)
	}
	if err != nil {
		// A cold boot under emulation can stall on a busy host; one retry.
		for attempt := 1; ; attempt++ {
			rec, err = b.bake(ctx, def, m, img, dir, id, progress)
			if err == nil || attempt == 2 || ctx.Err() != nil {
				break
			}
			fmt.Fprintf(progress, "bake attempt %d failed, retrying: %v\n", attempt, err)
		}
		if err != nil {
			return pandastack.Template{}, err
		}
		rec.Template.BuildMs = time.Since(t0).Milliseconds()
		if err := writeRecord(dir, rec); err != nil {
			return pandastack.Template{}, err
		}
	} else {
		fmt.Fprintf(progress, "cached: %s\n", dir)
	}
	step(5, "ready")
	fmt.Fprintf(progress, "template %s ready (%s, cold boot %.0f ms, %s)\n", name, id, rec.ColdBoot, time.Since(t0).Round(time.Millisecond))
	return rec.Template, nil
}

// machine is what def's bake (and its build VM) boots: def's size on this
// host's accelerator.
func (b *Builder) machine(def Def, bt Boot) vmm.Machine {
	return vmm.Machine{CPUs: def.CPUs, CPUModel: qemu.CPUModel(b.cfg.Driver.Accel()), MemoryMiB: def.MemoryMiB, Kernel: bt.Kernel.Vmlinuz, Initrd: bt.Initrd, Cmdline: qemu.KernelCmdline(b.cfg.Driver.Accel()),
		NoPIT: qemu.NoPIT(b.cfg.Driver.Accel()), FreePageReporting: true, VolumeSlots: vmm.VolumeSlots,
		DirectPort: true}
}

func catalogNames() string {
	var n []string
	for k := range Catalog {
		n = append(n, k)
	}
	return strings.Join(n, ", ")
}

func readRecord(dir string) (record, error) {
	var r record
	b, err := os.ReadFile(filepath.Join(dir, "template.json"))
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

func writeRecord(dir string, r record) error {
	b, _ := json.MarshalIndent(r, "", "  ")
	tmp := filepath.Join(dir, "template.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "template.json"))
}

var qemuVer struct {
	once sync.Once
	v    string
}

// QEMUVersion is the first line of `qemu-system-x86_64 --version`; part of
// every bake key, since device state does not restore across versions.
func QEMUVersion() string { return qemuVersion() }

func qemuVersion() string {
	qemuVer.once.Do(func() {
		out, _ := exec.Command("qemu-system-x86_64", "--version").Output()
		qemuVer.v = strings.SplitN(string(out), "\n", 2)[0]
	})
	return qemuVer.v
}

// bake cold-boots the image, waits for the agent, warms the page cache, and
// saves the VM: RAM file plus device state plus the disk as it was.
func (b *Builder) bake(ctx context.Context, def Def, m vmm.Machine, img, dir, id string, progress io.Writer) (record, error) {
	var rec record
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return rec, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(tmp)
		}
	}()
	// The VM boots on its own raw copy of the image, which becomes the
	// template's disk; its RAM file becomes the template's memory.
	disk := filepath.Join(tmp, vmm.DiskFile)
	if err := rawCopy(ctx, img, disk); err != nil {
		return rec, err
	}
	if err := os.Chmod(disk, 0o600); err != nil {
		return rec, err
	}
	mem := filepath.Join(tmp, vmm.MemFile)
	t0 := time.Now()
	v, err := b.cfg.Driver.Boot(ctx, vmm.BootSpec{Machine: m, Disk: disk, MemFile: mem})
	if err != nil {
		return rec, fmt.Errorf("boot: %w", err)
	}
	defer v.Kill(context.Background())
	bootCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-v.Exited():
			cancel()
		case <-bootCtx.Done():
		}
	}()
	cl, err := waitAgent(bootCtx, v)
	if err != nil {
		return rec, err
	}
	rec.ColdBoot = float64(time.Since(t0).Microseconds()) / 1000
	fmt.Fprintf(progress, "guest agent answered after %.0f ms (cold boot, %s)\n", rec.ColdBoot, b.cfg.Driver.Accel())
	if def.Prepare != nil {
		if err := def.Prepare(bootCtx, cl, progress); err != nil {
			return rec, err
		}
	}
	if def.Warm != "" {
		res, err := cl.Exec(bootCtx, pandastack.ExecRequest{Cmd: def.Warm, TimeoutSeconds: 120}, nil, func(pandastack.ExecEvent) error { return nil })
		if err != nil || res.ExitCode != 0 {
			return rec, fmt.Errorf("warm-up command %q failed: exit %d: %v", def.Warm, res.ExitCode, err)
		}
	}
	if err := cl.Sync(bootCtx); err != nil {
		return rec, fmt.Errorf("sync guest disks: %w", err)
	}
	if m.FreePageReporting {
		settleFreePages(bootCtx, mem, progress)
	}
	if err := v.SaveState(bootCtx, filepath.Join(tmp, vmm.StateFile)); err != nil {
		return rec, fmt.Errorf("save vm state: %w", err)
	}
	cl.Close()
	if err := v.Kill(ctx); err != nil {
		return rec, err
	}
	// Pages the guest zeroed and never wrote again need not be read ahead
	// by every restore: holes instead.
	if n, err := cowfs.PunchZeros(mem); err != nil {
		return rec, err
	} else if n > 0 {
		fmt.Fprintf(progress, "zero pages punched out of the RAM file: %d MiB\n", n>>20)
	}
	_ = os.RemoveAll(dir)
	if err := cowfs.SyncDir(tmp); err != nil {
		return rec, fmt.Errorf("install template: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return rec, fmt.Errorf("install template: %w", err)
	}
	ok = true
	if err := b.cfg.Driver.Seal(vmm.Saved(dir, m)); err != nil {
		os.RemoveAll(dir)
		return rec, err
	}
	rec.Machine = m
	rec.Disk = filepath.Join(dir, vmm.DiskFile)
	rec.Image = img
	rec.Layout = layout
	rec.Template = pandastack.Template{Name: def.Name, ID: id, CPUs: m.CPUs, MemoryMiB: m.MemoryMiB, DiskMiB: def.DiskMiB,
		Accel: b.cfg.Driver.Accel(), BuiltAt: time.Now().UTC()}
	return rec, nil
}

// rawCopy writes image (raw or qcow2, by extension) to dst as a raw,
// sparse file, sharing blocks with a raw image where the filesystem can.
func rawCopy(ctx context.Context, image, dst string) error {
	cmd := exec.CommandContext(ctx, "cp", "--sparse=always", "--reflink=auto", image, dst)
	if imageFormat(image) == "qcow2" {
		cmd = exec.CommandContext(ctx, "qemu-img", "convert", "-q", "-f", "qcow2", "-O", "raw", image, dst)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("copy disk image: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if len(s) > 800 {
		s = s[len(s)-800:]
	}
	return s
}

// ColdBootMs returns the recorded cold boot time of a template.
func (b *Builder) ColdBootMs(ctx context.Context, name string) (float64, error) {
	name, id, _, err := b.resolve(ctx, name)
	if err != nil {
		return 0, err
	}
	rec, err := readRecord(b.dir(name, id))
	return rec.ColdBoot, err
}

// helloAttempt bounds one connection's wait for a cold-booting agent's
// answer before waitAgent drops it and dials again with a new Hello. A
// boot under load takes seconds to tens of them; a connection that never
// got an answer (seen once in CI: a step's VM silent for the whole three
// minutes, cause unknown) should not be the only one tried.
var helloAttempt = 30 * time.Second

// waitAgent connects to a cold-booting VM's guest agent, retrying until it
// answers, the VM exits or ctx ends.
func waitAgent(ctx context.Context, v vmm.VM) (*guestconn.Client, error) {
	for {
		c, err := guestconn.Dial(ctx, v.AgentSocket())
		if err == nil {
			var cl *guestconn.Client
			hctx, cancel := context.WithTimeout(ctx, helloAttempt)
			cl, _, err = c.Handshake(hctx)
			cancel()
			if err == nil {
				return cl, nil
			}
			c.Close()
		}
		console := tail(filepath.Join(v.Dir(), "serial.log"))
		select {
		case <-v.Exited():
			return nil, fmt.Errorf("wait for guest agent: the VM exited; console: %s", console)
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for guest agent: %w (%v); console: %s", ctx.Err(), err, console)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runOut runs a command and returns its standard output.
func runOut(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// imageFormat is a disk image's format, by its extension.
func imageFormat(path string) string {
	if strings.HasSuffix(path, ".qcow2") {
		return "qcow2"
	}
	return "raw"
}
