package functions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// A deploy used to start its runtime in a new microVM: Python ~0.5 s,
// Node 2.5–5 s under TCG, most of a deploy. A runtime base is a snapshot,
// baked once per (template build, runtime, memory size, shim), of a VM in
// which our shim has started the runtime and waits for a handler
// (shim.py/shim.mjs --wait). A deploy restores it, unpacks the bundle, has
// the waiting shim load the handler with the function's env (one request
// on the shim's port), and snapshots that: the function's own snapshot, as
// before. Bases hold no team's code or env, so one base serves every team:
// they are platform snapshots (no team), made only from public templates;
// a team's own template gets no base (its deploys start the runtime).
//
// What a runtime seeds once at its start is the same in every VM restored
// from one snapshot: Python's str hash secret and V8's hash seeds are
// shared by the functions baked from one base, as they already were by
// every fresh invocation of one function. The kernel's RNG is reseeded at
// each restore (the guest agent), so os.urandom, crypto.randomBytes and
// Python's secrets differ; the Python shim reseeds the random module
// before each call, and the Node shim makes Math.random draw from the
// kernel's RNG.

// baseRetry is how long a base that failed to bake is not tried again
// (deploys meanwhile start their runtime).
const baseRetry = time.Minute

// basePrefix starts every base's snapshot name; see baseName.
const basePrefix = "fn-base-"

// baseKey names a base: what it is baked from.
type baseKey struct {
	runtime  string
	template string // name
	build    string // the template build's ID
	memMiB   int    // 0: the template's
	shims    string // the shim set's hash (shimSet.hash)
}

// baseEntry is a base as this server knows it: being looked for or baked
// (done open), ready (snapshot set) or failed (err, at failedAt).
type baseEntry struct {
	done     chan struct{}
	snapshot string
	err      error
	failedAt time.Time
}

// prefix is the start of k's snapshot names: its family's, then a hash
// of all of k (a base of another build or shim set is stale).
func (k baseKey) prefix() string {
	return k.familyPrefix() + shortHash(k.build, k.shims) + "-"
}

// familyPrefix starts the names of every base of k's runtime, template
// and size, whatever the build or shim.
func (k baseKey) familyPrefix() string {
	return basePrefix + k.runtime + "-" + shortHash(k.template, fmt.Sprint(k.memMiB)) + "-"
}

func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:6])
}

// runtimeBase returns the base snapshot a deploy of runtime on template
// (memMiB, 0: the template's) for teamID restores, baking it on first
// use; "" when there is none (a team's own template, no Resolve, or a
// base that failed to bake lately): the deploy then starts its runtime.
func (s *Service) runtimeBase(ctx context.Context, teamID, template, runtime string, memMiB int) string {
	if s.cfg.Resolve == nil || s.cfg.Snapshots == nil {
		return ""
	}
	t, err := s.cfg.Resolve(ctx, teamID, template)
	if err != nil || t.TeamID != "" || t.ID == "" {
		return "" // a team's own template: no shared base; or the deploy's create reports the error
	}
	k := baseKey{runtime: runtime, template: t.Name, build: t.ID, memMiB: memMiB, shims: s.shims.hash}
	s.mu.Lock()
	e := s.bases[k]
	if e != nil && e.err != nil && time.Since(e.failedAt) > baseRetry {
		e = nil
	}
	owner := e == nil
	if owner {
		e = &baseEntry{done: make(chan struct{})}
		s.bases[k] = e
	}
	s.mu.Unlock()
	if owner {
		// Baked for every team, it outlives the deploy that asked first.
		go s.makeBase(context.WithoutCancel(ctx), k, e)
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return ""
	}
	if e.err != nil {
		return ""
	}
	return e.snapshot
}

// makeBase finds k's base among the platform's snapshots or bakes it,
// drops the stale bases of its family, and keeps a process prepared to
// restore it.
func (s *Service) makeBase(ctx context.Context, k baseKey, e *baseEntry) {
	defer close(e.done)
	snaps, err := s.cfg.Snapshots.ListSnapshots(ctx, "")
	if err != nil {
		s.failBase(k, e, fmt.Errorf("list snapshots: %w", err))
		return
	}
	var stale []string
	for _, sn := range snaps {
		if sn.TeamID != "" || !strings.HasPrefix(sn.Name, k.familyPrefix()) {
			continue
		}
		if strings.HasPrefix(sn.Name, k.prefix()) && e.snapshot == "" {
			e.snapshot = sn.ID
		} else {
			stale = append(stale, sn.ID)
		}
	}
	if e.snapshot == "" {
		sn, err := s.bakeBase(ctx, k)
		if err != nil {
			s.failBase(k, e, err)
			return
		}
		e.snapshot = sn.ID
	}
	for _, id := range stale {
		s.log.Info("dropping a stale runtime base", "snapshot", id)
		s.dropSnapshot(ctx, id)
	}
	if s.cfg.Prewarm != nil && s.cfg.PrewarmSize > 0 {
		if err := s.cfg.Prewarm(ctx, e.snapshot, 1); err != nil {
			s.log.Warn("prepare a process for a runtime base", "snapshot", e.snapshot, "err", err)
		}
	}
}

func (s *Service) failBase(k baseKey, e *baseEntry, err error) {
	s.log.Warn("no runtime base: deploys start their runtime", "runtime", k.runtime, "template", k.template, "err", err)
	e.err, e.failedAt = err, time.Now()
}

// forgetBase drops snapshot id from the known bases (it could not be
// restored): the next deploy looks for, or bakes, another.
func (s *Service) forgetBase(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, e := range s.bases {
		select {
		case <-e.done:
			if e.snapshot == id {
				delete(s.bases, k)
			}
		default:
		}
	}
}

// bakeBase starts a platform VM (no team's: it counts against no quota)
// from k's template, unpacks the shims, starts k's runtime waiting for a
// handler, warms its invocation path up and snapshots it. The VM is
// killed whatever happens.
func (s *Service) bakeBase(ctx context.Context, k baseKey) (pandastack.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DeployTimeout)
	defer cancel()
	t0 := time.Now()
	sb, err := s.cfg.Engine.Create(ctx, pandastack.CreateRequest{Template: k.template + "@" + k.build, MemoryMiB: k.memMiB,
		TTL: s.cfg.DeployTimeout + time.Minute, Lifetime: pandastack.LifetimeSandbox, ManagedBy: "function-runtime:" + k.runtime,
		Metadata: map[string]string{"pandastack.function.role": "runtime-base", "pandastack.function.runtime": k.runtime, vmLabel: "1"}})
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("bake %s runtime base: start its VM: %w", k.runtime, err)
	}
	defer func() {
		if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), sb.ID, pandastack.StateKilled); err != nil {
			s.log.Error("kill a runtime base's VM", "sandbox", sb.ID, "err", err)
		}
	}()
	g, err := s.cfg.Engine.Guest(ctx, sb.ID)
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("bake %s runtime base: reach its VM: %w", k.runtime, err)
	}
	shims, err := s.shims.tar()
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	start := "tar -xf - -C / --no-same-owner && { " + shimWaitCommand(k.runtime) + " & }"
	if out, err := run(ctx, g, pandastack.ExecRequest{Cmd: start}, shims); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("bake %s runtime base: start the runtime: %w (%s)", k.runtime, err, out)
	}
	if err := waitLoaded(ctx, g); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("bake %s runtime base: %w", k.runtime, err)
	}
	tStarted := time.Now()
	if err := warmUp(ctx, g); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("bake %s runtime base: %w", k.runtime, err)
	}
	snap, err := s.cfg.Engine.Snapshot(ctx, sb.ID, k.prefix()+pandastack.NewID("")[:8])
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("bake %s runtime base: snapshot its VM: %w", k.runtime, err)
	}
	s.log.Info("runtime base baked", "runtime", k.runtime, "template", k.template, "snapshot", snap.ID,
		"start_ms", tStarted.Sub(t0).Milliseconds(), "ms", time.Since(t0).Milliseconds())
	return snap, nil
}
