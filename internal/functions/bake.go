package functions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// bake starts a microVM from template, unpacks the bundle and the shims
// in it, starts the shim (which loads the handler) and, once the shim is
// ready, warms it up (warmUp), readies runtime's OpenSSL generators for
// their clones (staleGenerators) and snapshots the running VM. The VM is
// killed whatever happens.
func (s *Service) bake(ctx context.Context, teamID, name, runtime, template string, memMiB int, b *bundle, cmd string, env map[string]string) (pandastack.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DeployTimeout)
	defer cancel()
	t0 := time.Now()
	ttl := int64(s.cfg.DeployTimeout/time.Second) + 60
	sb, err := s.cfg.Sandboxes.Create(ctx, teamID, sandboxes.CreateParams{Template: template, TTLSeconds: &ttl, MemoryMiB: memMiB,
		Metadata: map[string]string{"pandastack.function": name, "pandastack.function.role": "deploy", vmLabel: "1"}, ManagedBy: "function:" + name})
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: start its VM: %w", name, err)
	}
	defer func() {
		if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), sb.ID, pandastack.StateKilled); err != nil {
			s.log.Error("kill a function's deploy VM", "sandbox", sb.ID, "err", err)
		}
	}()
	g, err := s.cfg.Engine.Guest(ctx, sb.ID)
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: reach its VM: %w", name, err)
	}
	// One exec unpacks the bundle from its stdin and starts the shim in the
	// background (its own session; it outlives the exec): one round trip
	// through the guest where an upload, an unpack and a start took three.
	start := "tar -xf - -C / --no-same-owner && { " + cmd + " & }"
	if out, err := run(ctx, g, pandastack.ExecRequest{Cmd: start, Env: env}, bytes.NewReader(b.tar)); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: unpack its bundle and start its runtime: %w (%s)", name, err, out)
	}
	tStarted := time.Now()
	if err := waitLoaded(ctx, g); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: %w", name, err)
	}
	tLoaded := time.Now()
	if err := warmUp(ctx, g); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: %w", name, err)
	}
	if err := staleGenerators(ctx, g, runtime); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: %w", name, err)
	}
	tWarm := time.Now()
	snap, err := s.cfg.Engine.Snapshot(ctx, sb.ID, "fn-"+name+"-"+pandastack.NewID("")[:12])
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: snapshot its VM: %w", name, err)
	}
	s.log.Info("function baked", "name", name, "sandbox", sb.ID, "prepare_ms", tStarted.Sub(t0).Milliseconds(),
		"load_ms", tLoaded.Sub(tStarted).Milliseconds(), "warmup_ms", tWarm.Sub(tLoaded).Milliseconds(), "snapshot_ms", time.Since(tWarm).Milliseconds())
	return snap, nil
}

// waitLoaded waits for the shim to say the handler loaded ("ready") or
// did not ("error", then EInvalid with what the runtime said).
func waitLoaded(ctx context.Context, g pandastack.Guest) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := g.Stat(ctx, stateDir+"/ready"); err == nil {
			return nil
		}
		var msg bytes.Buffer
		if err := g.ReadFile(ctx, stateDir+"/error", &msg, nil); err == nil {
			return pandastack.Errorf(pandastack.EInvalid, "the handler failed to load: %s", strings.TrimSpace(msg.String()))
		}
		select {
		case <-ctx.Done():
			var log bytes.Buffer
			_ = g.ReadFile(context.WithoutCancel(ctx), stateDir+"/shim.log", &log, nil)
			return pandastack.Errorf(pandastack.ETimeout, "the handler did not load in time: %s", lastLines(log.String(), 20))
		case <-tick.C:
		}
	}
}

// warmUp sends the shim its warm-up call (the handler is not called): the
// invocation path runs through once in the guest, agent and runtime, so
// the work a runtime does on a first use (V8 compiling the shim's
// functions, the socket and JSON paths) is in the snapshot and not in
// every fresh invocation.
func warmUp(ctx context.Context, g pandastack.Guest) error {
	reply, err := ask(ctx, g, map[string]any{"warmup": true, "event": nil, "context": map[string]string{"invocation_id": "warm-up", "trigger": "api"}})
	if err != nil {
		return fmt.Errorf("warm up the runtime: %w", err)
	}
	if !reply.OK {
		return fmt.Errorf("warm up the runtime: it answered %+v", reply.Error)
	}
	return nil
}

// staleGenerators readies a Node runtime's OpenSSL generators for the
// snapshot's clones. OpenSSL keeps its own generators in the process
// (key generation, primes, every TLS handshake's randoms and ephemeral
// keys: nothing the shim can redirect to the kernel's RNG), seeded once
// at Node's start and reseeded only when their last reseed is older than
// an interval (an hour for the primary one) by the wall clock: every
// fresh invocation of a function drew the same keys (seen: one Ed25519
// key for every invocation). Node has no call that reseeds them (Python's
// ssl.RAND_add does: shim.py). So the guest's clock is stepped back
// further than that interval and the shim draws from the generators, so
// each one's last reseed lies in that past; the snapshot is taken so,
// every restore steps the clock to the host's, and the first draw in a
// clone reseeds from the kernel's RNG, itself reseeded at the restore:
// a thread's generator takes its seed from the primary one, which checks
// its own age first (shim.mjs has why that draw always comes after the
// clock step and the kernel's reseed).
func staleGenerators(ctx context.Context, g pandastack.Guest, runtime string) error {
	if runtime != RuntimeNode {
		return nil
	}
	past := time.Now().Add(-staleBy).Unix()
	if out, err := run(ctx, g, pandastack.ExecRequest{Args: []string{"date", "-u", "-s", fmt.Sprintf("@%d", past)}}, nil); err != nil {
		return fmt.Errorf("step the clock back for OpenSSL's generators: %w (%s)", err, strings.TrimSpace(out))
	}
	reply, err := ask(ctx, g, map[string]any{"openssl": true})
	if err != nil {
		return fmt.Errorf("draw from OpenSSL's generators: %w", err)
	}
	if !reply.OK {
		return fmt.Errorf("draw from OpenSSL's generators: the shim answered %+v", reply.Error)
	}
	return nil
}

// staleBy is how far back staleGenerators steps the clock: past OpenSSL's
// longest reseed interval (the primary generator's hour).
const staleBy = 3 * time.Hour

// shimDialTimeout bounds how long a bake tries to reach a shim that
// listens (refusals included, see dialShim).
const shimDialTimeout = 20 * time.Second

// ask sends the shim one request line and reads its one reply line.
func ask(ctx context.Context, g pandastack.Guest, req any) (shimReply, error) {
	var reply shimReply
	line, err := json.Marshal(req)
	if err != nil {
		return reply, err
	}
	dctx, cancel := context.WithTimeout(ctx, shimDialTimeout)
	conn, _, err := dialShim(dctx, g, nil) // the request is written after: a load line can be large
	cancel()
	if err != nil {
		return reply, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return reply, err
	}
	data, err := bufio.NewReader(io.LimitReader(conn, 1<<20)).ReadBytes('\n')
	if err != nil {
		return reply, err
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return reply, fmt.Errorf("decode %q: %w", bytes.TrimSpace(data), err)
	}
	return reply, nil
}

// errBaseGone: a runtime base could not be restored (its snapshot is
// gone) or its shim does not answer; the deploy starts its runtime
// instead.
var errBaseGone = errors.New("the runtime base is gone")

// bakeOnBase restores runtime base snapshot base as a VM of teamID,
// unpacks the bundle, has the waiting shim load the handler (file's
// function) with env, readies runtime's OpenSSL generators for their
// clones (staleGenerators), and snapshots the VM as the function's
// version; the VM is killed whatever happens. A handler that does not
// load is EInvalid with what the runtime said.
func (s *Service) bakeOnBase(ctx context.Context, teamID, name, runtime, base string, b *bundle, file, function string, env map[string]string) (pandastack.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.DeployTimeout)
	defer cancel()
	t0 := time.Now()
	ttl := int64(s.cfg.DeployTimeout/time.Second) + 60
	sb, err := s.cfg.Sandboxes.Create(ctx, teamID, sandboxes.CreateParams{Snapshot: base, TTLSeconds: &ttl,
		Metadata: map[string]string{"pandastack.function": name, "pandastack.function.role": "deploy", vmLabel: "1"}, ManagedBy: "function:" + name})
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: %w: %w", name, errBaseGone, err)
	}
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: start its VM: %w", name, err)
	}
	baked := false
	defer func() {
		// Once the snapshot is taken the VM is killed off the answer's
		// path (Wait waits for it); a deploy that failed has it killed
		// before it answers.
		if baked {
			s.teardown(context.WithoutCancel(ctx), s.log, sb.ID, nil)
			return
		}
		if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), sb.ID, pandastack.StateKilled); err != nil {
			s.log.Error("kill a function's deploy VM", "sandbox", sb.ID, "err", err)
		}
	}()
	tRestored := time.Now()
	g, err := s.cfg.Engine.Guest(ctx, sb.ID)
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: reach its VM: %w", name, err)
	}
	// A small bundle's files ride on the load request (the shim writes
	// them); a big one is unpacked by tar first (a process to start,
	// slow under TCG on a first run).
	files, small := b.codeFiles(maxInlineBundleBytes)
	if !small {
		if out, err := run(ctx, g, pandastack.ExecRequest{Cmd: "tar -xf - -C / --no-same-owner"}, bytes.NewReader(b.tar)); err != nil {
			return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: unpack its bundle: %w (%s)", name, err, out)
		}
		files = nil
	}
	tUnpacked := time.Now()
	if env == nil {
		env = map[string]string{}
	}
	reply, err := ask(ctx, g, map[string]any{"load": map[string]any{"dir": codeDir, "file": file, "function": function, "env": env, "files": files}})
	if err != nil && ctx.Err() != nil {
		return pandastack.Snapshot{}, pandastack.Errorf(pandastack.ETimeout, "the handler did not load within %s", s.cfg.DeployTimeout)
	}
	if pandastack.ErrorCode(err) == pandastack.ERefused {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: %w: its shim does not answer: %w", name, errBaseGone, err)
	}
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: load the handler: %w", name, err)
	}
	if !reply.OK {
		msg := "the runtime gave no reason"
		if reply.Error != nil {
			msg = strings.TrimSpace(reply.Error.Message)
		}
		return pandastack.Snapshot{}, pandastack.Errorf(pandastack.EInvalid, "the handler failed to load: %s", msg)
	}
	if err := staleGenerators(ctx, g, runtime); err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: %w", name, err)
	}
	tLoaded := time.Now()
	snap, err := s.cfg.Engine.Snapshot(ctx, sb.ID, "fn-"+name+"-"+pandastack.NewID("")[:12])
	if err != nil {
		return pandastack.Snapshot{}, fmt.Errorf("deploy function %s: snapshot its VM: %w", name, err)
	}
	baked = true
	s.log.Info("function baked", "name", name, "sandbox", sb.ID, "base", base, "restore_ms", tRestored.Sub(t0).Milliseconds(),
		"unpack_ms", tUnpacked.Sub(tRestored).Milliseconds(), "load_ms", tLoaded.Sub(tUnpacked).Milliseconds(),
		"snapshot_ms", time.Since(tLoaded).Milliseconds(), "ms", time.Since(t0).Milliseconds())
	return snap, nil
}

// run runs a command to its end, stdin (nil: none) on its standard
// input, and returns its output; a non-zero exit is an error.
func run(ctx context.Context, g pandastack.Guest, req pandastack.ExecRequest, stdin io.Reader) (string, error) {
	var out bytes.Buffer
	res, err := g.Exec(ctx, req, stdin, func(ev pandastack.ExecEvent) error {
		if ev.Type == "stdout" || ev.Type == "stderr" {
			_, _ = io.Copy(&out, bytes.NewReader(ev.Data))
		}
		return nil
	})
	if err != nil {
		return out.String(), err
	}
	if res.ExitCode != 0 {
		return out.String(), fmt.Errorf("exit code %d", res.ExitCode)
	}
	return out.String(), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
