package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/diskreserve"
	"github.com/pandastack/pandastack/internal/jail"
	"github.com/pandastack/pandastack/internal/server"
	"github.com/pandastack/pandastack/internal/templates"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// runDoctor: `pandastack doctor` checks this host and says which accelerator
// sandboxes would run under, by booting a guest under KVM.
func runDoctor(ctx context.Context, s *streams, args []string) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(s.err)
	dataDir := fs.String("data-dir", "/var/lib/pandastack", "the server's data directory (the probe uses its kernel cache)")
	cacheDir := fs.String("cache-dir", "", "the server's build cache, if not DATA/cache")
	reserveFlag := fs.String("storage-reserve", "auto", "the server's --storage-reserve (free space kept on the VM filesystem)")
	objStore := fs.String("object-store", os.Getenv("PANDASTACK_OBJECT_STORE"), "the server's --object-store URL (default file://DATA/objects)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	failed := false
	check := func(name string, ok bool, detail string) {
		mark := "ok  "
		if !ok {
			mark, failed = "FAIL", true
		}
		fmt.Fprintf(s.out, "%s  %-28s %s\n", mark, name, detail)
	}
	note := func(name, detail string) { fmt.Fprintf(s.out, "note  %-28s %s\n", name, detail) }

	check("running as root", os.Getuid() == 0, "needed for debootstrap, per-VM uids and sandbox network namespaces")
	for _, tool := range []struct{ bin, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"}, {"qemu-img", "qemu-utils"}, {"debootstrap", "debootstrap"},
		{"mkfs.ext4", "e2fsprogs"}, {"debugfs", "e2fsprogs"}, {"apt-get", "apt"}, {"dpkg", "dpkg"},
		{"ip", "iproute2"}, {"nft", "nftables"}, {"wrk", "wrk (bench only)"},
	} {
		p, err := exec.LookPath(tool.bin)
		detail := p
		if err != nil {
			detail = "missing: apt-get install " + tool.pkg
		}
		check(tool.bin, err == nil, detail)
	}
	if v := templates.QEMUVersion(); v != "" {
		note("qemu version", v)
	}
	agent, err := server.FindAgent()
	check("pandastack-guest", err == nil, errOr(err, agent))
	if err == nil {
		addon := server.NodeHelloPath(agent)
		if _, err := os.Stat(addon); err == nil {
			note("node function hello addon", addon)
		} else {
			note("node function hello addon", "missing (scripts/setup builds it): fresh Node invocations wait for the guest agent's hello")
		}
	}

	var st unix.Statfs_t
	if err := os.MkdirAll(*dataDir, 0o711); err == nil && unix.Statfs(*dataDir, &st) == nil {
		free := st.Bavail * uint64(st.Bsize) >> 30
		check("free disk in data dir", free >= 10, fmt.Sprintf("%d GiB free in %s (templates need a few GiB)", free, *dataDir))
	} else {
		check("data dir", false, fmt.Sprintf("cannot create %s", *dataDir))
	}
	if err := jail.Available(); err != nil {
		note("vm jail", "off: "+err.Error())
	} else {
		note("vm jail", "QEMU runs in its own mount, network, pid, ipc and uts namespaces, in a root of its own files, without capabilities")
		cg := jail.ProbeCgroups("pandastack-vms")
		if cg.Mode() == "" {
			note("vm cgroups", "none: VMs run without CPU, memory, pids and I/O caps ("+cg.Status()+")")
		} else {
			note("vm cgroups", cg.Status())
		}
	}
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil {
		f.Close()
		note("/dev/kvm", "present and openable; a guest boot decides whether it works")
	} else {
		note("/dev/kvm", fmt.Sprintf("unusable (%v)", err))
	}
	checkObjectStore(ctx, check, *dataDir, *objStore)
	if failed || agent == "" {
		fmt.Fprintln(s.out, "\nfix the failures above, then run doctor again")
		return 1
	}
	b, err := templates.New(templates.Config{DataDir: *dataDir, CacheDir: *cacheDir, AgentPath: agent})
	if err != nil {
		fmt.Fprintf(s.err, "error: %v\n", err)
		return 1
	}
	fmt.Fprintln(s.out, "\nprobing the accelerator: fetching the guest kernel (cached) and booting it under KVM...")
	bt, err := b.BootFiles(ctx, discardWriter{})
	if err != nil {
		check("guest kernel", false, err.Error())
		return 1
	}
	check("guest kernel", true, filepath.Base(bt.Kernel.Vmlinuz))
	res := qemu.Probe(ctx, "", bt.Kernel.Vmlinuz, bt.Initrd)
	fmt.Fprintf(s.out, "\naccelerator: %s — %s\nisolation:   %s\n", strings.ToUpper(string(res.Accel)), res.Reason, res.Accel.Isolation())
	if res.Accel == pandastack.AccelTCG {
		fmt.Fprintln(s.out, "             Sandboxes work (for development and CI) but are slower and are not a security boundary.")
	}
	cow := filepath.Join(*dataDir, "cow")
	switch {
	case cowfs.Supported(cow):
		note("vm storage", cow+": reflink copies (snapshots, forks and hibernation copy no bytes)")
		// Every VM's RAM and disk files live there and grow as guests write:
		// a full one kills running sandboxes (see README, "A full disk").
		if free, err := cowfs.Free(cow); err == nil {
			check("free space for vm files", free >= minCowFree,
				fmt.Sprintf("%d MiB free in %s (below %d MiB running sandboxes are at risk)", free>>20, cow, minCowFree>>20))
		}
		storageReserve(check, cow, *reserveFlag)
	case os.Getuid() == 0:
		note("vm storage", "the server will mount an XFS image (reflink) on "+cow)
	default:
		check("vm storage", false, cow+" cannot reflink, and mounting an XFS image there needs root")
	}
	if failed {
		return 1
	}
	return 0
}

// storageReserve reports the server's storage reserve on the VM
// filesystem cow and fails when free space is at or below it (the server
// then refuses new sandboxes, snapshots and volumes with 507).
func storageReserve(check func(string, bool, string), cow, flag string) {
	spec, err := diskreserve.ParseSpec(flag)
	if err != nil {
		check("storage reserve", false, err.Error())
		return
	}
	r, err := diskreserve.New(cow, spec)
	if err != nil {
		check("storage reserve", false, err.Error())
		return
	}
	st, err := r.Status()
	if err != nil {
		check("storage reserve", false, err.Error())
		return
	}
	check("storage reserve", st.FreeBytes > st.ReserveBytes, fmt.Sprintf(
		"%d MiB free of %d MiB, reserve %d MiB (--storage-reserve %s): at or below it new allocations answer 507",
		st.FreeBytes>>20, st.TotalBytes>>20, st.ReserveBytes>>20, flag))
}

// minCowFree is the free space on the VM file system under which doctor
// fails: a few sandboxes' worth of RAM.
const minCowFree = 2 << 30

func errOr(err error, ok string) string {
	if err != nil {
		return err.Error()
	}
	return ok
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
