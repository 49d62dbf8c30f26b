package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// TestJail inspects a running sandbox's QEMU from the host and checks each
// property of its jail (issue 12 item 6): its own mount, network and pid
// namespaces; a root that holds only its own files (read-only but for its
// RAM file and serial log); no capabilities, no_new_privs, seccomp; its own
// uid; a cgroup whose limits follow its machine; a VM directory the VM's uid
// cannot write; template RAM files no VM user can write.
func TestJail(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "jail")
	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	pid := vmPID(main.dataDir, sb.ID)
	if !qemuRunning(pid) {
		t.Fatalf("no QEMU for sandbox %s (pid %d)", sb.ID, pid)
	}
	proc := func(name string) string {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			t.Fatalf("read /proc/%d/%s: %v", pid, name, err)
		}
		return string(b)
	}
	vmDir := filepath.Join(main.dataDir, "cow", "vms", sb.ID)
	// In its jail the VM's files are where they were when QEMU started:
	// a pooled QEMU's directory is renamed on the host when a restore
	// takes it, but its binds stay at the old path (its mem-path).
	jailDir := ""
	for _, a := range strings.Split(cmdline(pid), "\x00") {
		if _, rest, ok := strings.Cut(a, "mem-path="); ok {
			jailDir = filepath.Dir(strings.Split(rest, ",")[0])
		}
	}
	if jailDir == "" {
		t.Fatalf("no mem-path on QEMU's command line")
	}

	t.Run("namespaces", func(t *testing.T) {
		for _, ns := range []string{"mnt", "net", "pid", "ipc", "uts"} {
			own, _ := os.Readlink("/proc/self/ns/" + ns)
			its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
			if err != nil || its == own {
				t.Errorf("QEMU shares the host's %s namespace (%s, %v)", ns, its, err)
			}
		}
		// Its network namespace has nothing but a loopback: the guest's
		// NIC is a tap passed in from the sandbox's namespace.
		dev := proc("net/dev")
		for _, l := range strings.Split(dev, "\n")[2:] {
			if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && name != "lo" {
				t.Errorf("QEMU's network namespace has interface %s", name)
			}
		}
		if !strings.Contains(proc("status"), "NSpid:\t"+strconv.Itoa(pid)+"\t1\n") {
			t.Errorf("QEMU is not pid 1 of a pid namespace of its own:\n%s", grepLines(proc("status"), "NSpid"))
		}
	})

	t.Run("root holds only its own files", func(t *testing.T) {
		root := fmt.Sprintf("/proc/%d/root", pid)
		for _, p := range []string{"/etc", "/home", "/root", "/proc", "/sys", "/var/lib", filepath.Join(main.dataDir, "pandastack.db"),
			filepath.Join(main.dataDir, "admin-key"), filepath.Join(main.dataDir, "secret.key"), filepath.Join(main.dataDir, "cow", "templates")} {
			if _, err := os.Lstat(root + p); err == nil {
				t.Errorf("%s is visible in QEMU's root", p)
			}
		}
		// Directories above its files hold nothing else (the data dir's
		// parent, e.g. /tmp, shows only the data dir).
		if ents, err := os.ReadDir(root + filepath.Dir(main.dataDir)); err != nil || len(ents) != 1 {
			t.Errorf("%s in the jail holds %d entries (%v), want only the data dir", filepath.Dir(main.dataDir), len(ents), err)
		}
		// Its VM directory holds only the files bound in: not the
		// disk or the sockets (passed as descriptors), not vm.json.
		ents, err := os.ReadDir(root + jailDir)
		if err != nil {
			t.Fatalf("VM dir in the jail: %v", err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if strings.Join(names, " ") != "mem serial.log" {
			t.Errorf("QEMU sees %v in its VM directory, want [mem serial.log]", names)
		}
		// Every mount is read-only but its RAM file and serial log; no
		// mount is of another VM's files.
		for _, l := range strings.Split(strings.TrimSpace(proc("mountinfo")), "\n") {
			f := strings.Fields(l)
			if len(f) < 6 {
				continue
			}
			point, opts := f[4], f[5]
			writable := strings.HasPrefix(opts, "rw")
			switch {
			case point == jailDir+"/mem" || point == jailDir+"/serial.log":
				if !writable {
					t.Errorf("%s is not writable", point)
				}
			case strings.HasPrefix(point, "/dev/"):
				if point != "/dev/null" && point != "/dev/zero" && point != "/dev/random" && point != "/dev/urandom" && point != "/dev/kvm" {
					t.Errorf("device %s in the jail", point)
				}
			case strings.HasPrefix(point, filepath.Join(main.dataDir, "cow")):
				t.Errorf("another VM file is mounted in the jail: %s", point)
			default:
				if writable {
					t.Errorf("%s is writable in the jail: %s", point, l)
				}
				if !strings.Contains(opts, "nosuid") {
					t.Errorf("%s is not nosuid", point)
				}
			}
		}
	})

	t.Run("no capabilities", func(t *testing.T) {
		st := proc("status")
		for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
			"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(st, want+"\n") {
				t.Errorf("want %q in QEMU's status:\n%s", want, grepLines(st, "Cap", "NoNewPrivs", "Seccomp"))
			}
		}
	})

	t.Run("own uid", func(t *testing.T) {
		st := proc("status")
		uid := firstField(grepLines(st, "Uid:"))
		if n, _ := strconv.Atoi(uid); n < 1_000_000 {
			t.Errorf("QEMU runs as uid %s, not a VM uid", uid)
		}
		for _, g := range strings.Fields(strings.TrimPrefix(grepLines(st, "Groups:"), "Groups:")) {
			if g == "0" {
				t.Errorf("QEMU has root's group")
			}
		}
		// The VM directory is root's: the VM's uid can plant nothing the
		// server would follow.
		fi, err := os.Stat(vmDir)
		if err != nil {
			t.Fatal(err)
		}
		if s := fi.Sys().(*syscall.Stat_t); s.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("VM dir is uid %d mode %v, want root's and not writable by others", s.Uid, fi.Mode().Perm())
		}
	})

	t.Run("cgroup", func(t *testing.T) {
		cmd := strings.Split(cmdline(pid), "\x00")
		mem, cpus := argAfter(cmd, "-m"), argAfter(cmd, "-smp")
		memMiB, _ := strconv.ParseInt(strings.TrimSuffix(mem, "M"), 10, 64)
		nCPU, _ := strconv.Atoi(cpus)
		if memMiB == 0 || nCPU == 0 {
			t.Fatalf("cannot read -m %q -smp %q", mem, cpus)
		}
		cg := map[string]string{} // controller ("" for v2) -> path
		for _, l := range strings.Split(strings.TrimSpace(proc("cgroup")), "\n") {
			parts := strings.SplitN(l, ":", 3)
			if len(parts) == 3 && strings.Contains(parts[2], "/pandastack-vms/") {
				cg[parts[1]] = parts[2]
			}
		}
		read := func(ctrl, path, file string) string {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, path, file))
			if err != nil {
				t.Errorf("read %s: %v", file, err)
			}
			return strings.TrimSpace(string(b))
		}
		checkMem := func(v string) {
			n, _ := strconv.ParseInt(v, 10, 64)
			if n < memMiB<<20 || n > memMiB<<20+2<<30 {
				t.Errorf("memory cap %s for a %d MiB guest: want its RAM plus a bounded margin", v, memMiB)
			}
		}
		switch {
		case cg[""] != "" && fileExists("/sys/fs/cgroup/cgroup.controllers"):
			p := cg[""]
			if got, want := read("", p, "cpu.max"), fmt.Sprintf("%d 100000", (nCPU+1)*100000); got != want {
				t.Errorf("cpu.max = %q, want %q", got, want)
			}
			checkMem(read("", p, "memory.max"))
			if got := read("", p, "pids.max"); got == "max" || got == "" {
				t.Errorf("pids.max = %q", got)
			}
			if io, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", p, "io.max")); err == nil && !strings.Contains(string(io), "rbps=536870912") {
				t.Errorf("io.max = %q of a sandbox that answered: want its read cap", io)
			}
		case cg["memory"] != "":
			if got, want := read("cpu", cg["cpu"], "cpu.cfs_quota_us"), strconv.Itoa((nCPU+1)*100000); got != want {
				t.Errorf("cpu.cfs_quota_us = %q, want %q", got, want)
			}
			checkMem(read("memory", cg["memory"], "memory.limit_in_bytes"))
			if got := read("pids", cg["pids"], "pids.max"); got == "max" || got == "" {
				t.Errorf("pids.max = %q", got)
			}
			// The read cap is put on once the guest answers (a restore's
			// page-ins are not the tenant's reads); this sandbox answered.
			if cg["blkio"] != "" {
				if got := read("blkio", cg["blkio"], "blkio.throttle.read_bps_device"); !strings.HasSuffix(got, " 536870912") {
					t.Errorf("blkio.throttle.read_bps_device = %q of a sandbox that answered: want its read cap", got)
				}
			}
		default:
			// A host without usable cgroups runs VMs uncapped, and doctor
			// says so.
			out, _ := exec.Command(filepath.Join(binDir, "pandastack"), "doctor", "--data-dir", main.dataDir).CombinedOutput()
			if !strings.Contains(string(out), "vm cgroups") || !strings.Contains(string(out), "none") {
				t.Errorf("QEMU is in no VM cgroup (%q) and doctor does not say so:\n%s", proc("cgroup"), out)
			}
		}
	})

	t.Run("template RAM files are not writable by VMs", func(t *testing.T) {
		n := 0
		_ = filepath.Walk(filepath.Join(main.dataDir, "cow", "templates"), func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() || fi.Name() != "mem" {
				return nil
			}
			n++
			if s := fi.Sys().(*syscall.Stat_t); s.Uid != 0 || fi.Mode().Perm()&0o222 != 0 {
				t.Errorf("template RAM file %s is uid %d mode %v", p, s.Uid, fi.Mode().Perm())
			}
			return nil
		})
		if n == 0 {
			t.Fatal("found no template RAM file")
		}
	})

	// The jailed sandbox works.
	r, err := sb.Exec(ctx, "echo jailed", sdk.ExecOptions{TimeoutSeconds: 60})
	if err != nil || strings.TrimSpace(string(r.Stdout)) != "jailed" {
		t.Fatalf("exec in a jailed sandbox: %v %+v", err, r)
	}
}

func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}

func firstField(line string) string {
	f := strings.Fields(line)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

func argAfter(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
