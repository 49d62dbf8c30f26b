package hostbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's CPU
// times: 100 on every Linux architecture PandaStack runs on.
const clockTicks = 100

// Usage is what the host and each VM process cost at one moment. CPU times
// are totals since each process started: two readings some seconds apart
// give the CPU used in between.
type Usage struct {
	CPUs int `json:"cpus"`
	// MemTotalKB and MemAvailableKB are the host's, from /proc/meminfo.
	MemTotalKB     int64 `json:"mem_total_kb"`
	MemAvailableKB int64 `json:"mem_available_kb"`
	// What the host's memory holds: anonymous pages (QEMU's own heap and,
	// under TCG, its translated code), the page cache (which holds every
	// VM's RAM file, so MemAvailable counts guest memory as free to
	// reclaim), and the part of it dirty, to be written back first.
	AnonKB   int64 `json:"anon_kb"`
	CachedKB int64 `json:"cached_kb"`
	DirtyKB  int64 `json:"dirty_kb"`
	// MemPressurePct is the share of the last 10 s in which some task
	// stalled waiting for memory (/proc/pressure/memory "some avg10"; -1
	// on a kernel without pressure stall information): the host's own
	// word that memory ran short, where MemAvailable cannot say it.
	MemPressurePct float64 `json:"mem_pressure_pct"`
	// HostBusyMs and HostTotalMs are the host's CPU time summed over its
	// CPUs (from /proc/stat): busy is all but idle and iowait.
	HostBusyMs  float64   `json:"host_busy_ms"`
	HostTotalMs float64   `json:"host_total_ms"`
	Machines    []Process `json:"machines"`
}

// Process is one VM's QEMU process.
type Process struct {
	ID  string `json:"id"`
	PID int    `json:"pid"`
	// PSSKB is the proportional set size (/proc/PID/smaps_rollup): pages
	// shared with other processes (a template's page cache mapped by
	// several VMs, QEMU's own binary and libraries) count divided by the
	// number of processes that map them. RSSKB counts them whole.
	PSSKB int64 `json:"pss_kb"`
	RSSKB int64 `json:"rss_kb"`
	// CPUMs is user plus system time of all its threads since it started.
	CPUMs float64 `json:"cpu_ms"`
}

// Usage reads the host's memory and CPU and every VM process's.
func (b *Bench) Usage(ctx context.Context) (Usage, error) {
	u := Usage{CPUs: runtime.NumCPU(), Machines: []Process{}}
	mi, err := os.ReadFile(filepath.Join(b.cfg.Proc, "meminfo"))
	if err != nil {
		return Usage{}, fmt.Errorf("read host memory: %w", err)
	}
	m := parseKB(mi)
	u.MemTotalKB, u.MemAvailableKB = m["MemTotal"], m["MemAvailable"]
	u.AnonKB, u.CachedKB, u.DirtyKB = m["AnonPages"], m["Cached"], m["Dirty"]
	u.MemPressurePct = -1
	if psi, err := os.ReadFile(filepath.Join(b.cfg.Proc, "pressure", "memory")); err == nil {
		if u.MemPressurePct, err = parsePressure(psi); err != nil {
			return Usage{}, err
		}
	}
	st, err := os.ReadFile(filepath.Join(b.cfg.Proc, "stat"))
	if err != nil {
		return Usage{}, fmt.Errorf("read host cpu time: %w", err)
	}
	if u.HostBusyMs, u.HostTotalMs, err = parseHostCPU(st); err != nil {
		return Usage{}, err
	}
	procs, err := b.cfg.Driver.Processes()
	if err != nil {
		return Usage{}, fmt.Errorf("list vm processes: %w", err)
	}
	for id, pid := range procs {
		if ctx.Err() != nil {
			return Usage{}, ctx.Err()
		}
		p, err := b.process(id, pid)
		if err != nil {
			continue // ended while we read it
		}
		u.Machines = append(u.Machines, p)
	}
	sort.Slice(u.Machines, func(i, j int) bool { return u.Machines[i].ID < u.Machines[j].ID })
	return u, nil
}

func (b *Bench) process(id string, pid int) (Process, error) {
	dir := filepath.Join(b.cfg.Proc, strconv.Itoa(pid))
	sm, err := os.ReadFile(filepath.Join(dir, "smaps_rollup"))
	if err != nil {
		return Process{}, err
	}
	st, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, err
	}
	cpu, err := parseProcCPU(st)
	if err != nil {
		return Process{}, err
	}
	kb := parseKB(sm)
	return Process{ID: id, PID: pid, PSSKB: kb["Pss"], RSSKB: kb["Rss"], CPUMs: cpu}, nil
}

// parseKB reads "Name:   123 kB" lines (/proc/meminfo, smaps_rollup) into
// a map of kB; other lines are skipped.
func parseKB(b []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		if v, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// parsePressure reads "some avg10=" from a pressure stall file
// (/proc/pressure/memory): the percentage of the last 10 s in which at
// least one task waited for the resource.
func parsePressure(b []byte) (float64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "some" {
			continue
		}
		v, ok := strings.CutPrefix(f[1], "avg10=")
		if !ok {
			break
		}
		return strconv.ParseFloat(v, 64)
	}
	return 0, fmt.Errorf("parse memory pressure: no \"some avg10=\" in %q", b)
}

// parseProcCPU reads utime + stime from a /proc/PID/stat line, in ms. The
// command name (field 2) is in parentheses and may hold spaces: fields are
// counted after its closing parenthesis.
func parseProcCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse process stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(3) ppid(4) ... utime(14) stime(15).
	if len(f) < 13 {
		return 0, fmt.Errorf("parse process stat: %d fields", len(f)+2)
	}
	var ticks float64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse process stat: %w", err)
		}
		ticks += float64(v)
	}
	return ticks * 1000 / clockTicks, nil
}

// parseHostCPU reads /proc/stat's "cpu" line: busy (all but idle and
// iowait) and total CPU time, in ms summed over CPUs.
func parseHostCPU(b []byte) (busy, total float64, err error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("parse host cpu time: no cpu line")
	}
	// user nice system idle iowait irq softirq steal (guest time is in user)
	for i, s := range f[1:] {
		if i >= 8 {
			break
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("parse host cpu time: %w", err)
		}
		ms := float64(v) * 1000 / clockTicks
		total += ms
		if i != 3 && i != 4 {
			busy += ms
		}
	}
	return busy, total, nil
}
