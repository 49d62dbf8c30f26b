package hostbench

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
)

// restorer is a stand-in for the QEMU driver (the real floors need VMs:
// pandastack bench): it records which snapshots it restored, how many at
// once, and takes 10 ms for each from exec, 4 of them from the state's load.
type restorer struct {
	restored []string
	answered int // restores asked to wait for the guest's answer
}

func (r *restorer) BareRestores(ctx context.Context, snap vmm.Snapshot, n int, answer vmm.FloorAnswer) ([]vmm.RestoreTime, time.Duration, error) {
	var each []vmm.RestoreTime
	for range n {
		r.restored = append(r.restored, snap.Key)
		if answer != nil {
			r.answered++
		}
		each = append(each, vmm.RestoreTime{FromExec: 10 * time.Millisecond, FromLoad: 4 * time.Millisecond})
	}
	return each, time.Duration(n) * 10 * time.Millisecond, nil
}
func (r *restorer) Processes() (map[string]int, error) { return nil, nil }
func (r *restorer) Accel() pandastack.Accel            { return "tcg" }

type functionSnapshots map[string]string // "team/name" to the snapshot's key

func (f functionSnapshots) FunctionSnapshot(ctx context.Context, teamID, name string) (vmm.Snapshot, error) {
	key, ok := f[teamID+"/"+name]
	if !ok {
		return vmm.Snapshot{}, pandastack.Errorf(pandastack.ENotFound, "function %s not found", name)
	}
	return vmm.Snapshot{Key: key}, nil
}

// A function floor restores the caller's function's snapshot, one by one
// then at once; another team's function of that name is not found, and a
// request naming a template and a function is refused.
func TestFunctionFloorRestoresTheCallersFunction(t *testing.T) {
	r := &restorer{}
	b := New(Config{Driver: r, Functions: functionSnapshots{"team-a/hello": "snap-a"}})
	f, err := b.Floor(t.Context(), FloorRequest{Function: "hello", TeamID: "team-a", Sequential: 2, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	if f.Function != "hello" || f.RestoreP50Ms != 10 || f.ParallelMs != 30 || len(r.restored) != 5 || r.restored[0] != "snap-a" {
		t.Fatalf("floor %+v, restored %v", f, r.restored)
	}
	if _, err := b.Floor(t.Context(), FloorRequest{Function: "hello", TeamID: "team-b"}); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("another team's function: %v, want %s", err, pandastack.ENotFound)
	}
	if _, err := b.Floor(t.Context(), FloorRequest{Template: "base", Function: "hello", TeamID: "team-a"}); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("a template and a function: %v, want %s", err, pandastack.EInvalid)
	}
}

// An answer floor waits for the guest's answer in every restore, one by
// one and at once, and says so; a plain one in none.
func TestAnswerFloorWaitsForTheGuest(t *testing.T) {
	r := &restorer{}
	b := New(Config{Driver: r, Templates: templateSnapshots{}})
	f, err := b.Floor(t.Context(), FloorRequest{Template: "base", Sequential: 2, Parallel: 3, Answer: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Answer || r.answered != 5 || len(r.restored) != 5 {
		t.Fatalf("answer floor %+v: %d of %d restores waited for the guest", f, r.answered, len(r.restored))
	}
	if f, err = b.Floor(t.Context(), FloorRequest{Template: "base", Sequential: 1}); err != nil || f.Answer || r.answered != 5 {
		t.Fatalf("plain floor %+v (%v): %d restores waited for the guest", f, err, r.answered)
	}
}

// An exec floor is an answer floor (its command needs the agent) and
// says so; every floor reports its restores timed from exec and from the
// state's load (a pooled process's start) apart.
func TestExecFloorAnswersAndTimesFromTheLoad(t *testing.T) {
	r := &restorer{}
	b := New(Config{Driver: r, Templates: templateSnapshots{}})
	f, err := b.Floor(t.Context(), FloorRequest{Template: "base", Sequential: 3, Exec: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Answer || !f.Exec || r.answered != 3 {
		t.Fatalf("exec floor %+v: %d of 3 restores waited for the guest", f, r.answered)
	}
	if f.RestoreP50Ms != 10 || f.LoadP50Ms != 4 || len(f.LoadMs) != 3 {
		t.Fatalf("exec floor %+v: want 10 ms from exec and 4 from the load, 3 of each", f)
	}
}

type templateSnapshots struct{}

func (templateSnapshots) Snapshot(ctx context.Context, ref string) (vmm.Snapshot, pandastack.Template, error) {
	return vmm.Snapshot{Key: "tpl-" + ref}, pandastack.Template{Name: ref}, nil
}

// A shim floor pings the function's shim on the direct port and waits for
// its pong; it is for functions only, and a machine without the port, or
// a shim that answers anything else, is an error, not a floor.
func TestShimFloorPingsTheShim(t *testing.T) {
	if err := (&FloorRequest{Template: "base", Shim: true}).Validate(); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("a template's shim floor: %v, want EInvalid", err)
	}
	r := FloorRequest{Function: "hello", Shim: true}
	if err := r.Validate(); err != nil || !r.Answer {
		t.Fatalf("a function's shim floor: %v, answer %v; want valid and timed until an answer", err, r.Answer)
	}
	if err := shimAnswers(t.Context(), nil, nil); err == nil {
		t.Fatal("no direct port: want an error")
	}
	for answer, ok := range map[string]bool{`{"ok":true,"result":"pong","logs":""}`: true, `{"ok":false,"error":{}}`: false} {
		host, guest := net.Pipe()
		go func() {
			defer guest.Close()
			line, _ := bufio.NewReader(guest).ReadString('\n')
			if line == "ping\n" {
				_, _ = guest.Write([]byte(answer + "\n"))
			}
		}()
		err := shimAnswers(t.Context(), nil, host)
		host.Close()
		if (err == nil) != ok {
			t.Fatalf("shim answered %s: err %v", answer, err)
		}
	}
}
