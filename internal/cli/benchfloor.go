package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// benchFloors are the floors a run's figures stand on, measured in the same
// run on the same host: a bare QEMU restore of the template (no network, no
// guest agent; the VMM's own cost, measured by the server on its host), 20
// of them at once, the same two timed until each guest's agent answered a
// hello (the VMM's and the guest's own cost: under TCG each new QEMU
// translates the guest's first instructions again), and a process spawn
// inside an already-running guest. The pooled floors time the answer (and
// the guest's first command) from the moment a QEMU already up is handed
// the state, as a create from the pool does: the floors a create and its
// first command stand on under this accelerator.
type benchFloors struct {
	RestoreFloor          float64 `json:"restore_floor_ms"`
	Parallel20Floor       float64 `json:"parallel20_floor_ms"`
	AnswerFloor           float64 `json:"answer_floor_ms"`
	Parallel20AnswerFloor float64 `json:"parallel20_answer_floor_ms"`
	SpawnFloor            float64 `json:"spawn_floor_ms"`
	PooledAnswerFloor     float64 `json:"pooled_answer_floor_ms"`
	PooledAnswerFloorP99  float64 `json:"pooled_answer_floor_p99_ms"`
	FirstExecFloor        float64 `json:"first_exec_floor_ms"`
	FirstExecFloorP99     float64 `json:"first_exec_floor_p99_ms"`
	// Each figure ÷ its floor: how far above what the VMM and the guest
	// take alone the platform is. Ratios in one run survive the drift of
	// a shared machine; figures across runs do not.
	CreateFloorRatio     float64 `json:"create_floor_ratio"`
	CreateExecFloorRatio float64 `json:"create_exec_floor_ratio"`
	ExecFloorRatio       float64 `json:"exec_floor_ratio"`
	Parallel20FloorRatio float64 `json:"parallel20_floor_ratio"`
	// Over the floors that include the guest's answer.
	CreateAnswerFloorRatio     float64 `json:"create_answer_floor_ratio"`
	Parallel20AnswerFloorRatio float64 `json:"parallel20_answer_floor_ratio"`
	// Over the pooled floors: create p50 and p99, and create + first exec.
	CreatePooledFloorRatio    float64 `json:"create_pooled_floor_ratio"`
	CreateP99PooledFloorRatio float64 `json:"create_p99_pooled_floor_ratio"`
	CreateExecFirstFloorRatio float64 `json:"create_exec_first_exec_floor_ratio"`
	WakeFloorRatio            float64 `json:"wake_floor_ratio"`
	ForkFloorRatio            float64 `json:"fork_floor_ratio"`
}

// spawnLoops is how many /bin/true the spawn floor runs in the guest.
const spawnLoops = 50

// spawnScript times spawnLoops fork+execs of /bin/true from a shell inside
// the guest, with the guest's clock, and prints the mean in microseconds.
var spawnScript = fmt.Sprintf(`s=$(date +%%s%%N); i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done; e=$(date +%%s%%N); echo $(( (e - s) / %d000 ))`, spawnLoops, spawnLoops)

// spawnFloor measures a process spawn inside sb's guest, in ms: the median
// of three runs of spawnScript.
func spawnFloor(ctx context.Context, sb *sdk.Sandbox) (float64, error) {
	var xs []float64
	for i := 0; i < 3; i++ {
		r, err := sb.Exec(ctx, spawnScript, sdk.ExecOptions{TimeoutSeconds: 60})
		if err != nil {
			return 0, err
		}
		if r.ExitCode != 0 {
			return 0, fmt.Errorf("spawn loop exited %d: %s", r.ExitCode, r.Stderr)
		}
		us, err := strconv.ParseFloat(strings.TrimSpace(string(r.Stdout)), 64)
		if err != nil || us <= 0 {
			return 0, fmt.Errorf("spawn loop printed %q", r.Stdout)
		}
		xs = append(xs, us/1000)
	}
	return pct(xs, 50), nil
}

// ratio is a ÷ b, or 0 (not measured) when either is missing.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// setRatios fills in each figure's ratio to its floor. Create and create +
// exec stand on a restore (and a spawn); wake and fork are restores too.
func (res *benchResult) setRatios() {
	f := &res.benchFloors
	f.CreateFloorRatio = ratio(res.CreateP50, f.RestoreFloor)
	if f.RestoreFloor > 0 && f.SpawnFloor > 0 {
		f.CreateExecFloorRatio = ratio(res.CreateExecP50, f.RestoreFloor+f.SpawnFloor)
	}
	f.ExecFloorRatio = ratio(res.ExecP50, f.SpawnFloor)
	f.Parallel20FloorRatio = ratio(res.Parallel20, f.Parallel20Floor)
	f.CreateAnswerFloorRatio = ratio(res.CreateP50, f.AnswerFloor)
	f.Parallel20AnswerFloorRatio = ratio(res.Parallel20, f.Parallel20AnswerFloor)
	f.CreatePooledFloorRatio = ratio(res.CreateP50, f.PooledAnswerFloor)
	f.CreateP99PooledFloorRatio = ratio(res.CreateP99, f.PooledAnswerFloorP99)
	f.CreateExecFirstFloorRatio = ratio(res.CreateExecP50, f.FirstExecFloor)
	f.WakeFloorRatio = ratio(res.WakeP50, f.RestoreFloor)
	f.ForkFloorRatio = ratio(res.ForkP50, f.RestoreFloor)
}

// measureRestoreFloor asks the server for the restore floors (admin key):
// 5 bare restores one at a time and parallel at once (0: none), then 10
// one at a time timed until the guest answered (and parallel at once),
// and 10 until the guest's first command exited. A server or key that
// cannot measure them leaves them 0 and says so.
func measureRestoreFloor(ctx context.Context, c *sdk.Client, tpl string, parallel int, res *benchResult, progress func(string, ...any)) {
	f, err := c.BenchFloor(ctx, tpl, 5, parallel)
	if err != nil {
		progress("no restore floor (it needs an admin key and a server that measures on its host): %v", err)
		return
	}
	res.RestoreFloor = f.RestoreP50Ms
	if parallel == 20 {
		res.Parallel20Floor = f.ParallelMs
	}
	if f, err = c.BenchAnswerFloor(ctx, tpl, 10, parallel); err != nil {
		progress("no answer floor: %v", err)
		return
	}
	res.AnswerFloor = f.RestoreP50Ms
	res.PooledAnswerFloor, res.PooledAnswerFloorP99 = f.LoadP50Ms, pct(f.LoadMs, 99)
	if parallel == 20 {
		res.Parallel20AnswerFloor = f.ParallelMs
	}
	if f, err = c.BenchExecFloor(ctx, tpl, 10); err != nil {
		progress("no first-command floor: %v", err)
		return
	}
	res.FirstExecFloor, res.FirstExecFloorP99 = f.LoadP50Ms, pct(f.LoadMs, 99)
}

// floorSandbox is a plain base sandbox for a floor measurement (the
// caller kills it).
func floorSandbox(ctx context.Context, c *sdk.Client) (*sdk.Sandbox, error) {
	return c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: "base", TTLSeconds: 900, Metadata: map[string]string{"bench": "1"}})
}

// wakeSamples hibernates and wakes sb n times: each wake call's time,
// client measured, in ms.
func wakeSamples(ctx context.Context, sb *sdk.Sandbox, n int) ([]float64, error) {
	var xs []float64
	for range n {
		if err := sb.Hibernate(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := sb.Wake(ctx); err != nil {
			return nil, err
		}
		xs = append(xs, ms(time.Since(t0)))
	}
	return xs, nil
}
