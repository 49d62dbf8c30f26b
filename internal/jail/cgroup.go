package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Limits are what a jail's cgroup caps.
type Limits struct {
	CPUs        int   // cpu time: this many CPUs' worth per period
	MemoryBytes int64 // memory (RAM, page cache the VM faults in, kernel memory)
	Pids        int   // tasks (QEMU threads)
	// IODevice is the block device ("MAJ:MIN") the VM's files live on;
	// ReadBPS/WriteBPS cap its bandwidth there (0: no cap).
	IODevice          string
	ReadBPS, WriteBPS int64
}

// Cgroups makes one cgroup per jail, under a group of the server's own:
// on the unified (v2) hierarchy when its controllers are available, else on
// the legacy (v1) per-controller hierarchies, else none (Mode "").
type Cgroups struct {
	mode string // "v2", "v1" or ""
	// dirs are the parent directories the jails' cgroups are made in:
	// one for v2, one per controller for v1.
	dirs map[string]string // controller ("" for v2) -> directory
	why  string
}

const cgroupFS = "/sys/fs/cgroup"

// ProbeCgroups finds how this host can cap jails and prepares the
// server's group (name, a path such as "pandastack-vms/ps1a2b3c": one group
// per server, so that servers sharing a host never sweep each other's) for
// them. It never fails: a
// host without usable cgroups gets a Cgroups that makes none, and Status
// says why.
func ProbeCgroups(name string) *Cgroups {
	if c, err := probeV2(name); err == nil {
		return c
	} else if c1, err1 := probeV1(name); err1 == nil {
		c1.why = fmt.Sprintf("cgroup v2 unusable (%v); using v1", err)
		return c1
	} else {
		return &Cgroups{why: fmt.Sprintf("no cgroups for VMs: v2: %v; v1: %v", err, err1)}
	}
}

func probeV2(name string) (*Cgroups, error) {
	b, err := os.ReadFile(filepath.Join(cgroupFS, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("not the unified hierarchy: %w", err)
	}
	have := strings.Fields(string(b))
	var want []string
	for _, c := range []string{"cpu", "memory", "pids", "io"} {
		for _, h := range have {
			if h == c {
				want = append(want, c)
			}
		}
	}
	if len(want) < 3 {
		return nil, fmt.Errorf("controllers %q lack cpu, memory or pids", have)
	}
	dir := filepath.Join(cgroupFS, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	// Controllers must be enabled from the top down; the root and the
	// server's groups hold no processes of ours, so this is allowed.
	parents := []string{cgroupFS}
	for p := cgroupFS; p != dir; {
		rest := strings.TrimPrefix(strings.TrimPrefix(dir, p), "/")
		first, _, _ := strings.Cut(rest, "/")
		p = filepath.Join(p, first)
		parents = append(parents, p)
	}
	for _, parent := range parents {
		for _, c := range want {
			if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil && c != "io" {
				return nil, fmt.Errorf("delegate %s in %s: %w", c, parent, err)
			}
		}
	}
	return &Cgroups{mode: "v2", dirs: map[string]string{"": dir}, why: "cgroup v2: " + strings.Join(want, ", ")}, nil
}

func probeV1(name string) (*Cgroups, error) {
	dirs := map[string]string{}
	for _, c := range []string{"cpu", "memory", "pids", "blkio"} {
		base := filepath.Join(cgroupFS, c)
		if _, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil {
			if c == "blkio" {
				continue
			}
			return nil, fmt.Errorf("no %s hierarchy", c)
		}
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
		dirs[c] = dir
	}
	return &Cgroups{mode: "v1", dirs: dirs, why: "cgroup v1 (the host has no usable v2)"}, nil
}

// Mode is "v2", "v1" or "" (no cgroups).
func (c *Cgroups) Mode() string { return c.mode }

// Status says what the cgroups are made with, or why there are none.
func (c *Cgroups) Status() string { return c.why }

// Create makes the cgroup for jail id with lim and returns its directories,
// for Spec.Cgroups. Limits the kernel refuses (an I/O cap on a device
// without throttling) are left out and reported in skipped.
func (c *Cgroups) Create(id string, lim Limits) (dirs []string, skipped []string, err error) {
	if c.mode == "" {
		return nil, nil, nil
	}
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") {
		return nil, nil, fmt.Errorf("cgroup for %q: not a valid name", id)
	}
	fail := func(err error) ([]string, []string, error) {
		c.Remove(id)
		return nil, nil, err
	}
	set := func(dir, file, value string, optional bool) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			if optional {
				skipped = append(skipped, fmt.Sprintf("%s=%s: %v", file, value, err))
				return nil
			}
			return fmt.Errorf("cgroup %s: set %s to %s: %w", id, file, value, err)
		}
		return nil
	}
	for ctrl, parent := range c.dirs {
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fail(fmt.Errorf("create cgroup %s: %w", dir, err))
		}
		dirs = append(dirs, dir)
		for _, s := range c.settings(ctrl, lim) {
			if err := set(dir, s.file, s.value, s.optional); err != nil {
				return fail(err)
			}
		}
	}
	return dirs, skipped, nil
}

type setting struct {
	file, value string
	optional    bool
}

const cpuPeriod = 100000 // µs

// settings are the files that set lim on controller ctrl ("" for v2).
func (c *Cgroups) settings(ctrl string, lim Limits) []setting {
	var s []setting
	if c.mode == "v2" {
		if lim.CPUs > 0 {
			s = append(s, setting{"cpu.max", fmt.Sprintf("%d %d", lim.CPUs*cpuPeriod, cpuPeriod), false})
		}
		if lim.MemoryBytes > 0 {
			s = append(s, setting{"memory.max", strconv.FormatInt(lim.MemoryBytes, 10), false},
				setting{"memory.swap.max", "0", true})
		}
		if lim.Pids > 0 {
			s = append(s, setting{"pids.max", strconv.Itoa(lim.Pids), false})
		}
		if lim.IODevice != "" && (lim.ReadBPS > 0 || lim.WriteBPS > 0) {
			s = append(s, setting{"io.max", fmt.Sprintf("%s rbps=%s wbps=%s", lim.IODevice, bps(lim.ReadBPS), bps(lim.WriteBPS)), true})
		}
		return s
	}
	switch ctrl {
	case "cpu":
		if lim.CPUs > 0 {
			s = append(s, setting{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod), false},
				setting{"cpu.cfs_quota_us", strconv.Itoa(lim.CPUs * cpuPeriod), false})
		}
	case "memory":
		if lim.MemoryBytes > 0 {
			s = append(s, setting{"memory.limit_in_bytes", strconv.FormatInt(lim.MemoryBytes, 10), false})
		}
	case "pids":
		if lim.Pids > 0 {
			s = append(s, setting{"pids.max", strconv.Itoa(lim.Pids), false})
		}
	case "blkio":
		if lim.IODevice != "" && lim.ReadBPS > 0 {
			s = append(s, setting{"blkio.throttle.read_bps_device", fmt.Sprintf("%s %d", lim.IODevice, lim.ReadBPS), true})
		}
		if lim.IODevice != "" && lim.WriteBPS > 0 {
			s = append(s, setting{"blkio.throttle.write_bps_device", fmt.Sprintf("%s %d", lim.IODevice, lim.WriteBPS), true})
		}
	}
	return s
}

// CapReads sets jail id's read bandwidth cap on device dev ("MAJ:MIN") to
// bps bytes a second, on a cgroup Create made. A VM's read cap is set once
// its guest answers, not at Create: the pages a restore faults in from the
// snapshot's memory file (each fault a read-around of the device's
// readahead window) are the platform's reads, and capped they made a wake
// wait out the cap (issue 12: wake 1.8x, fork 1.6x). The tenant's reads
// after that are capped.
func (c *Cgroups) CapReads(id, dev string, bps int64) error {
	if c.mode == "" || dev == "" || bps <= 0 || id == "" || id != filepath.Base(id) {
		return nil
	}
	dir, file, value := c.dirs[""], "io.max", fmt.Sprintf("%s rbps=%d", dev, bps)
	if c.mode == "v1" {
		dir, file, value = c.dirs["blkio"], "blkio.throttle.read_bps_device", fmt.Sprintf("%s %d", dev, bps)
	}
	if dir == "" {
		return nil // no blkio hierarchy
	}
	if err := os.WriteFile(filepath.Join(dir, id, file), []byte(value), 0); err != nil {
		return fmt.Errorf("cgroup %s: cap reads: %w", id, err)
	}
	return nil
}

func bps(n int64) string {
	if n <= 0 {
		return "max"
	}
	return strconv.FormatInt(n, 10)
}

// Remove deletes jail id's cgroup. A cgroup still holding a process stays
// (the kernel refuses): Remove is safe to call for any id.
func (c *Cgroups) Remove(id string) error {
	if c.mode == "" || id == "" || id != filepath.Base(id) {
		return nil
	}
	var errs []error
	for _, parent := range c.dirs {
		if err := os.Remove(filepath.Join(parent, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Sweep removes every empty jail cgroup: those a crashed server left
// behind. Cgroups of running VMs hold a process and stay.
func (c *Cgroups) Sweep() {
	for _, parent := range c.dirs {
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				_ = os.Remove(filepath.Join(parent, e.Name()))
			}
		}
	}
}

// Close removes the server's group when no jail cgroup is left in it (a
// server that leaves its VMs running keeps it: the kernel refuses). Each
// server's group is named by its VM directory, so one left behind per
// stopped server added up (hundreds on a CI host).
func (c *Cgroups) Close() {
	for _, parent := range c.dirs {
		_ = os.Remove(parent)
	}
}

// GroupDirs returns the server's group directories (for tests).
func (c *Cgroups) GroupDirs() []string {
	var dirs []string
	for _, d := range c.dirs {
		dirs = append(dirs, d)
	}
	return dirs
}

// List returns the names of the jail cgroups that exist (for tests and
// leak checks).
func (c *Cgroups) List() []string {
	seen := map[string]bool{}
	var names []string
	for _, parent := range c.dirs {
		ents, _ := os.ReadDir(parent)
		for _, e := range ents {
			if e.IsDir() && !seen[e.Name()] {
				seen[e.Name()] = true
				names = append(names, e.Name())
			}
		}
	}
	return names
}
