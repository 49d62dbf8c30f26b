// Package hostbench measures, on the host, what `pandastack bench` cannot
// see through the API: the floor a create stands on (bare VMM restores of
// a template's snapshot, no network, no guest agent) and what each VM
// process costs the host (memory by PSS, CPU time). The API serves both to
// admin keys (POST /v1/admin/bench/floor, GET /v1/admin/bench/usage), so
// the bench stays a client of the API and runs on the host's own numbers.
package hostbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/vmm"
)

// Restorer restores snapshots bare: the QEMU driver (qemu.Driver).
type Restorer interface {
	// BareRestores restores snap n times at once with no network, and
	// ends them: each one's time to running (or, with answer, until
	// answer, given the VM's agent socket and direct port, returned),
	// from exec and from the state's load, and the time until the last
	// one was done.
	BareRestores(ctx context.Context, snap vmm.Snapshot, n int, answer vmm.FloorAnswer) ([]vmm.RestoreTime, time.Duration, error)
	// Processes maps every VM id with a live process to its pid.
	Processes() (map[string]int, error)
	Accel() pandastack.Accel
}

// Templates finds a template's snapshot (templates.Builder).
type Templates interface {
	Snapshot(ctx context.Context, ref string) (vmm.Snapshot, pandastack.Template, error)
}

// Functions finds the snapshot of a team's function's latest version
// (the server, over the functions service and the host agent).
type Functions interface {
	FunctionSnapshot(ctx context.Context, teamID, name string) (vmm.Snapshot, error)
}

// Config configures a Bench.
type Config struct {
	Driver    Restorer
	Templates Templates
	Functions Functions // nil: no function floors
	Logger    *slog.Logger
	// Proc is the proc filesystem (default /proc; tests point it at files).
	Proc string
}

// Bench serves the host-side measurements.
type Bench struct {
	cfg Config
	log *slog.Logger
}

// New makes a Bench.
func New(cfg Config) *Bench {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Proc == "" {
		cfg.Proc = "/proc"
	}
	return &Bench{cfg: cfg, log: cfg.Logger}
}

// FloorRequest says what to measure.
type FloorRequest struct {
	Template string `json:"template"`
	// Function, instead of a template: the latest version's snapshot of
	// the caller's function of that name (TeamID, set by the API), the
	// floor a fresh invocation stands on.
	Function string `json:"function,omitempty"`
	TeamID   string `json:"-"`
	// Sequential is how many single bare restores to time, one after the
	// other (default 5, at most 50).
	Sequential int `json:"sequential"`
	// Parallel is how many bare restores to start at once (default 20, at
	// most 50; 0 measures none).
	Parallel int `json:"parallel"`
	// Answer times each restore until its guest agent answered a hello,
	// instead of until the VM runs: the floor under TCG, where the guest's
	// first instructions after a restore are translated again in every
	// new QEMU process.
	Answer bool `json:"answer,omitempty"`
	// Exec, with Answer, also runs /bin/true in each guest through its
	// agent and waits for it to exit: the floor under a create and its
	// first command, which under TCG spawns the first process a new QEMU
	// translates.
	Exec bool `json:"exec,omitempty"`
	// Shim, for a function, times each restore until the function's shim
	// answered a ping on the VM's direct port, with no agent greeted:
	// what any fresh invocation of it needs at least (the VM restored,
	// its runtime woken by a line and answering one), before its own
	// work — the hello's part, the call, the handler.
	Shim bool `json:"shim,omitempty"`
}

// Floor is what the VMM alone takes to restore a template.
type Floor struct {
	Template string           `json:"template"`
	Function string           `json:"function,omitempty"`
	Accel    pandastack.Accel `json:"accel"`
	// Answer: each time runs until the guest answered, not until it ran;
	// Exec: until its first command exited.
	Answer bool `json:"answer,omitempty"`
	Exec   bool `json:"exec,omitempty"`
	Shim   bool `json:"shim,omitempty"`
	// RestoreP50Ms is the median of the sequential restores, from QEMU's
	// exec until QMP says the VM runs (or, with Answer, until its guest
	// agent answered a hello).
	RestoreP50Ms float64   `json:"restore_p50_ms"`
	RestoreMs    []float64 `json:"restore_ms"`
	// LoadP50Ms and LoadMs are the same restores timed from the moment
	// the process was up and was handed the state: what a create from the
	// pool of processes waiting for a state stands on.
	LoadP50Ms float64   `json:"load_p50_ms"`
	LoadMs    []float64 `json:"load_ms"`

	Parallel int `json:"parallel"`
	// ParallelMs is how long Parallel restores started at once took until
	// the last one ran; ParallelP50Ms is the median of their own times.
	ParallelMs    float64 `json:"parallel_ms"`
	ParallelP50Ms float64 `json:"parallel_p50_ms"`
}

// maxFloor caps a floor request's counts (each is a QEMU process).
const maxFloor = 50

// Validate fills in defaults and refuses what is out of bounds.
func (r *FloorRequest) Validate() error {
	if r.Template == "" && r.Function == "" {
		r.Template = "base"
	}
	if r.Template != "" && r.Function != "" {
		return pandastack.Errorf(pandastack.EInvalid, "template and function: give one")
	}
	if r.Sequential == 0 {
		r.Sequential = 5
	}
	if r.Sequential < 1 || r.Sequential > maxFloor {
		return pandastack.Errorf(pandastack.EInvalid, "sequential must be between 1 and %d", maxFloor)
	}
	if r.Parallel < 0 || r.Parallel > maxFloor {
		return pandastack.Errorf(pandastack.EInvalid, "parallel must be between 0 and %d", maxFloor)
	}
	if r.Shim && r.Function == "" {
		return pandastack.Errorf(pandastack.EInvalid, "shim: measures a function's floor; give function")
	}
	if r.Shim && r.Exec {
		return pandastack.Errorf(pandastack.EInvalid, "shim and exec: give one")
	}
	if r.Exec || r.Shim {
		r.Answer = true
	}
	return nil
}

// Floor restores the template bare, r.Sequential times one by one, then
// r.Parallel times at once.
func (b *Bench) Floor(ctx context.Context, r FloorRequest) (Floor, error) {
	if err := r.Validate(); err != nil {
		return Floor{}, err
	}
	snap, what, err := b.snapshot(ctx, r)
	if err != nil {
		return Floor{}, err
	}
	f := Floor{Template: r.Template, Function: r.Function, Accel: b.cfg.Driver.Accel(), Parallel: r.Parallel, Answer: r.Answer, Exec: r.Exec, Shim: r.Shim}
	var answer vmm.FloorAnswer
	switch {
	case r.Shim:
		answer = shimAnswers
	case r.Exec:
		answer = agentExecs
	case r.Answer:
		answer = agentAnswers
	}
	for i := 0; i < r.Sequential; i++ {
		each, _, err := b.cfg.Driver.BareRestores(ctx, snap, 1, answer)
		if err != nil {
			return Floor{}, fmt.Errorf("measure restore floor of %s: %w", what, err)
		}
		f.RestoreMs = append(f.RestoreMs, ms(each[0].FromExec))
		f.LoadMs = append(f.LoadMs, ms(each[0].FromLoad))
	}
	f.RestoreP50Ms, f.LoadP50Ms = median(f.RestoreMs), median(f.LoadMs)
	if r.Parallel > 0 {
		each, wall, err := b.cfg.Driver.BareRestores(ctx, snap, r.Parallel, answer)
		if err != nil {
			return Floor{}, fmt.Errorf("measure parallel restore floor of %s: %w", what, err)
		}
		var xs []float64
		for _, t := range each {
			xs = append(xs, ms(t.FromExec))
		}
		f.ParallelMs, f.ParallelP50Ms = ms(wall), median(xs)
	}
	b.log.Info("bench floor", "of", what, "answer", r.Answer, "exec", r.Exec, "shim", r.Shim, "restore_p50_ms", f.RestoreP50Ms, "load_p50_ms", f.LoadP50Ms, "parallel", f.Parallel, "parallel_ms", f.ParallelMs)
	return f, nil
}

// agentAnswers says hello to a restored guest's agent and waits for its
// answer, as the host agent does before a create answers.
func agentAnswers(ctx context.Context, c, _ net.Conn) error {
	cl, _, err := guestconn.NewConn(c).Handshake(ctx)
	if err != nil {
		return err
	}
	return cl.Close()
}

// agentExecs says hello to a restored guest's agent, runs /bin/true in
// the guest and waits for it to exit, as a create and its first command do.
func agentExecs(ctx context.Context, c, _ net.Conn) error {
	cl, _, err := guestconn.NewConn(c).Handshake(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: "/bin/true"}, nil, func(pandastack.ExecEvent) error { return nil })
	if err != nil {
		return fmt.Errorf("first command: %w", err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("first command: /bin/true exited %d", res.ExitCode)
	}
	return nil
}

// shimPing is the line a function's shim answers first of all, with one
// line (functions/shim: shim.py and shim.mjs, direct_call/directCall).
const shimPing = "ping\n"

// shimAnswers sends a restored function VM's shim a ping on its direct
// port and waits for the answer line; the agent is never greeted.
func shimAnswers(ctx context.Context, _, direct net.Conn) error {
	if direct == nil {
		return pandastack.Errorf(pandastack.EInvalid, "the function's machine has no direct port (deployed before it had one)")
	}
	if d, ok := ctx.Deadline(); ok {
		_ = direct.SetDeadline(d)
	}
	if _, err := io.WriteString(direct, shimPing); err != nil {
		return fmt.Errorf("ping the shim: %w", err)
	}
	line, err := bufio.NewReader(direct).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read the shim's answer: %w", err)
	}
	if !strings.Contains(line, `"pong"`) {
		return fmt.Errorf("the shim answered %q, not pong (a shim from before the ping)", strings.TrimSpace(line))
	}
	return nil
}

// snapshot is the snapshot r measures, and what it is of (for errors).
func (b *Bench) snapshot(ctx context.Context, r FloorRequest) (vmm.Snapshot, string, error) {
	if r.Function == "" {
		snap, _, err := b.cfg.Templates.Snapshot(ctx, r.Template)
		return snap, "template " + r.Template, err
	}
	if b.cfg.Functions == nil {
		return vmm.Snapshot{}, "", pandastack.Errorf(pandastack.EUnavailable, "this server does not measure function floors")
	}
	snap, err := b.cfg.Functions.FunctionSnapshot(ctx, r.TeamID, r.Function)
	return snap, "function " + r.Function, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// median is the nearest-rank 50th percentile (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[(len(s)+1)/2-1]
}
