package qemu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestproto"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Files of a VM inside its directory. Socket paths must stay under 108 bytes.
const (
	qmpSock   = "qmp.sock"
	agentSock = "agent.sock"
	// directSock serves the second port of a machine with one
	// (vmm.Machine.DirectPort).
	directSock = "direct.sock"
	serialLog  = "serial.log"
	qemuLog    = "qemu.log"
	metaFile   = "vm.json"
)

// sandboxPolicy is QEMU's seccomp filter: no obsolete syscalls, no privilege
// changes, no fork/exec, no resource-control calls. Migration therefore goes
// through passed file descriptors, never "exec:".
const sandboxPolicy = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

type argSpec struct {
	dir        string
	accel      pandastack.Accel
	m          vmm.Machine
	memFile    string // mapped shared: the VM's RAM is this file
	disk       string
	diskFormat string
	diskCache  string // QEMU cache mode of the root disk
	diskFD     bool   // the disk is passed open, read-write as fd 3 and read-only as fd 4
	incoming   bool
	// volFD is the first of the descriptors of the volume slots' files:
	// slot i is passed read-write as volFD+2i and read-only as volFD+2i+1.
	volFD int
}

// volFDSet is the fd set of volume slot i.
func volFDSet(i int) int { return 2 + i }

// volumeArgs are the volume slots' drives and devices. Every VM has them,
// in the same order and with the same properties, so that any snapshot
// restores onto any VM: only the files behind them differ. The guest finds
// a slot by its serial (/sys/block/vdX/serial = "volN"). Guest flushes go
// to the host's disk (cache=writeback honours them): a volume is durable.
func volumeArgs(volFD, slots int) []string {
	var args []string
	for i := 0; i < slots; i++ {
		set := volFDSet(i)
		args = append(args,
			"-add-fd", fmt.Sprintf("fd=%d,set=%d,opaque=vol%d-rw", volFD+2*i, set, i),
			"-add-fd", fmt.Sprintf("fd=%d,set=%d,opaque=vol%d-ro", volFD+2*i+1, set, i),
			"-drive", fmt.Sprintf("id=vol%d,file=/dev/fdset/%d,file.locking=off,format=raw,if=none,discard=unmap,cache=writeback", i, set),
			"-device", fmt.Sprintf("virtio-blk-device,drive=vol%d,serial=vol%d", i, i))
	}
	return args
}

// The root disk of a restored VM is passed to QEMU open, in an fd set (one
// read-write and one read-only descriptor: QEMU opens it both ways), not by
// path: QEMU reopens its disk when it resumes after a migration,
// and a VM's directory may have been renamed by then (a wake keeps the
// sandbox's id).
const diskFDSet = "/dev/fdset/1"

func buildArgs(s argSpec) []string {
	accel := "tcg,thread=multi"
	if s.accel == pandastack.AccelKVM {
		accel = "kvm"
	}
	cpu := s.m.CPUModel
	if cpu == "" {
		cpu = CPUModel(s.accel)
	}
	cache := s.diskCache
	if cache == "" {
		cache = "writeback"
	}
	disk := s.disk
	var pre []string
	if s.diskFD {
		pre = []string{"-add-fd", "fd=3,set=1,opaque=disk-rw", "-add-fd", "fd=4,set=1,opaque=disk-ro"}
		// The file is this VM's alone; QEMU's image locks would only make
		// its own two descriptors conflict when it reactivates the disk.
		disk = diskFDSet + ",file.locking=off"
	}
	args := []string{
		"-name", filepath.Base(s.dir),
		"-M", machineType(s.m),
		"-accel", accel,
		"-cpu", cpu,
		"-smp", fmt.Sprint(s.m.CPUs),
		"-m", fmt.Sprintf("%dM", s.m.MemoryMiB),
		"-object", fmt.Sprintf("memory-backend-file,id=mem,size=%dM,mem-path=%s,share=on", s.m.MemoryMiB, s.memFile),
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot",
		"-kernel", s.m.Kernel,
		"-initrd", s.m.Initrd,
		"-append", s.m.Cmdline,
		"-chardev", "file,id=serial,append=on,path=" + filepath.Join(s.dir, serialLog), // appended, so it can be capped (serialcap.go)
		"-serial", "chardev:serial",
		"-drive", fmt.Sprintf("id=root,file=%s,format=%s,if=none,discard=unmap,cache=%s", disk, s.diskFormat, cache),
		"-device", "virtio-blk-device,drive=root",
		"-device", "virtio-serial-device,max_ports=" + maxPorts(s.m),
		"-device", "virtserialport,chardev=agent,name=" + guestproto.PortName,
		"-sandbox", sandboxPolicy,
	}
	if s.m.DirectPort {
		args = append(args, "-device", "virtserialport,chardev=direct,name="+guestproto.DirectPortName)
	}
	args = append(args, volumeArgs(s.volFD, s.m.VolumeSlots)...)
	if s.m.FreePageReporting {
		// No balloon target is ever set: the device only takes reports of
		// free pages, and QEMU punches them out of the RAM file.
		args = append(args, "-device", "virtio-balloon-device,free-page-reporting=on")
	}
	if s.incoming {
		args = append(args, "-incoming", "defer")
	}
	return append(pre, args...)
}

// maxPorts is the virtio-serial device's port count for m: QEMU keeps
// port 0 for a console, so the agent's port needs two and a direct port
// one more. The count is in the device's saved state: machines from
// before direct ports keep theirs.
func maxPorts(m vmm.Machine) string {
	if m.DirectPort {
		return "3"
	}
	return "2"
}

// socketArgs are the QMP, agent and (when m has one) direct sockets'
// chardevs (the ports refer to their ids): QEMU listens on the descriptors
// from fd on the server bound and passed (QMP, agent, direct), or, with fd
// below 0, binds the paths in dir itself.
func socketArgs(dir string, m vmm.Machine, fd int) []string {
	if fd < 0 {
		args := []string{
			"-chardev", "socket,id=agent,path=" + filepath.Join(dir, agentSock) + ",server=on,wait=off",
			"-qmp", "unix:" + filepath.Join(dir, qmpSock) + ",server=on,wait=off",
		}
		if m.DirectPort {
			args = append(args, "-chardev", "socket,id=direct,path="+filepath.Join(dir, directSock)+",server=on,wait=off")
		}
		return args
	}
	args := []string{
		"-chardev", fmt.Sprintf("socket,id=agent,fd=%d,server=on,wait=off", fd+1),
		"-chardev", fmt.Sprintf("socket,id=qmp,fd=%d,server=on,wait=off", fd),
		"-mon", "chardev=qmp,mode=control",
	}
	if m.DirectPort {
		args = append(args, "-chardev", fmt.Sprintf("socket,id=direct,fd=%d,server=on,wait=off", fd+2))
	}
	return args
}

// socketNames are the names of the sockets socketArgs passes for m, in its
// order.
func socketNames(m vmm.Machine) []string {
	if m.DirectPort {
		return []string{qmpSock, agentSock, directSock}
	}
	return []string{qmpSock, agentSock}
}

// DefaultCmdline is the guest kernel command line for PandaStack images.
//
// sysctl.vm.compaction_proactiveness=0 turns off the guest kernel's
// proactive compaction (on by default since Linux 5.9, at 20): kcompactd
// then woke every 500 ms in every idle guest to score its memory's
// fragmentation, and moved pages about when the score was high — which
// free-page reporting (the balloon hands the host free 2 MiB blocks)
// keeps it, since the blocks the guest frees go back to the host and the
// guest's memory looks fragmented again. Compaction on demand (a
// high-order allocation that finds no free block) still runs. Measured
// under TCG, ten idle base sandboxes on a 2-core host, the setting
// changed by hand in all of them, 30 s windows in turn (2026-12-07): QEMU
// CPU per idle sandbox 13.4 and 10.5 ticks (0.45 and 0.35 % of a core)
// with it at 20, 5.6 and 3.8 ticks at 0; its context switches 1,399 and
// 1,383 against 434 and 387. At 130 idle sandboxes (bench --density, the
// build before against this one): CPU per idle sandbox 0.91 → 0.22 %, an
// exec's p99 13.0 → 0.54 s, memory per sandbox unchanged (BENCHMARKS.md,
// session 23).
const DefaultCmdline = "console=ttyS0 quiet loglevel=3 panic=-1 random.trust_cpu=on rdinit=/init root=/dev/vda rw sysctl.vm.compaction_proactiveness=0"

// machineType is QEMU's machine for m: microvm with ACPI, and without the
// PIT where m says so (NoPIT).
func machineType(m vmm.Machine) string {
	if m.NoPIT {
		return "microvm,acpi=on,pit=off,memory-backend=mem"
	}
	return "microvm,acpi=on,memory-backend=mem"
}

// NoPIT says whether a machine baked for accel leaves out the PIT (an
// emulated 8254 timer): under TCG it does. The guest's timers run on its
// local APIC and its clock on the TSC (see KernelCmdline), so nothing in
// the guest uses the PIT, but QEMU starts its channel 0 counting, and the
// guest's 6.1 kernel never stops it: QEMU woke every 27 ms (both edges of
// an 18.2 Hz square wave) for each VM, idle or not, to toggle an interrupt
// line no one listens to.
func NoPIT(accel pandastack.Accel) bool { return accel == pandastack.AccelTCG }

// KernelCmdline is the guest kernel command line for accel. Under KVM the
// guest has kvm-clock (a stable clocksource: it goes tickless when idle)
// and the default line. Under TCG:
//
//   - tsc_early_khz: the guest's TSC runs at the host's rate, and the
//     kernel's calibration against the emulated PIT fails now and then on
//     a busy host (it then marks the TSC unstable and stalls early in
//     boot): so the host's TSC rate is given to it.
//   - tsc=reliable: microvm has no HPET and no ACPI PM timer, so the
//     clocksource watchdog checks the TSC against jiffies, which an
//     emulated, descheduled guest loses; it then marks the TSC unstable
//     and falls back to refined-jiffies, a clocksource that cannot run
//     high-resolution timers, so the guest never stops its 250 Hz tick
//     when idle (measured: ~250 timer interrupts a second and ~5 % of a
//     host core per idle sandbox on a loaded 2-core host). Under TCG the
//     guest TSC is the host's TSC plus an offset that migration carries
//     (a restore resumes it where the save left it): it is the better
//     clock of the two. Trusted, it stays the clocksource, and an idle
//     guest goes tickless.
//   - highres=off: tickless idle without high-resolution timers (the
//     kernel's low-resolution NOHZ mode). With them on, every short sleep
//     in the guest (the Go runtime's sysmon in the agent, Python's and
//     the network stack's timeouts) programs the emulated local APIC timer
//     for its exact expiry; under TCG each of those interrupts is costly.
//     Off, timers expire on the next tick (4 ms at 250 Hz) and the tick
//     still stops when the guest is idle. Measured under TCG against
//     highres on, two rounds on a loaded 2-core host: timer interrupts
//     per proxied HTTP request 9–19 against 44–52, the guest's QEMU CPU
//     per request 22–30 ms against 32–38, per exec 41–48 ms against
//     54–56, per wake 290–345 ms against 430 (BENCHMARKS.md, session 7).
func KernelCmdline(accel pandastack.Accel) string {
	if accel != pandastack.AccelTCG {
		return DefaultCmdline
	}
	line := DefaultCmdline + " " + tcgClockArgs
	if khz := hostTSCkHz(); khz > 0 {
		return fmt.Sprintf("%s tsc_early_khz=%d", line, khz)
	}
	return line
}

// tcgClockArgs make a TCG guest keep its TSC as its clocksource and go
// tickless when idle with its timers on the tick (see KernelCmdline).
const tcgClockArgs = "tsc=reliable highres=off"

// hostTSCkHz reads the host's clock rate from /proc/cpuinfo (with a constant
// TSC, the TSC rate).
func hostTSCkHz() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !strings.Contains(string(b), "constant_tsc") {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cpu MHz") {
			var mhz float64
			if _, err := fmt.Sscanf(strings.TrimSpace(strings.SplitN(l, ":", 2)[1]), "%f", &mhz); err == nil && mhz > 0 {
				return int(mhz * 1000)
			}
		}
	}
	return 0
}

// CPUModel is the virtual CPU for accel: the host's own under KVM. Under
// TCG, an x86-64-v2 CPU without AVX: guest libraries then pick SSE code
// paths, which the emulator translates and runs faster (measured: create
// 66 → 50 ms, warm exec 37 → 27 ms against "max"). With ARAT (the local
// APIC timer keeps running in deep idle): without it the guest kernel
// needs a broadcast timer (an HPET, which microvm lacks) before it will
// use one-shot timers, so it keeps its periodic tick and never goes idle
// tickless, whatever its clocksource (see KernelCmdline).
func CPUModel(accel pandastack.Accel) string {
	if v := os.Getenv("PANDASTACK_QEMU_CPU"); v != "" {
		return v
	}
	if accel == pandastack.AccelKVM {
		return "host"
	}
	return "qemu64,+ssse3,+sse4.1,+sse4.2,+popcnt,+arat"
}

// guestMAC is the NIC's address in every VM: clones keep it (each lives in
// a network namespace of its own, see internal/network).
const guestMAC = "02:50:53:00:00:02"

// nicArgs is the guest's virtio-net NIC. Every VM has it, so snapshots
// restore with the same devices whether or not the host gives it a network:
// with a tap (tapFD >= 0, a descriptor passed to QEMU) it is the backend;
// without, the NIC has no peer (the link stays down). The tap is opened
// without a vnet header, so the negotiated features are the same.
func nicArgs(tapFD int) []string {
	if tapFD < 0 {
		return []string{"-device", "virtio-net-device,mac=" + guestMAC}
	}
	return []string{"-netdev", fmt.Sprintf("tap,id=net0,fd=%d", tapFD), "-device", "virtio-net-device,netdev=net0,mac=" + guestMAC}
}
