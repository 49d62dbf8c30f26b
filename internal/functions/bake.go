package functions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// bake starts a microVM from template, unpacks the bundle and the shims
// in it, starts the shim (which loads the handler) and, once the shim is
// ready, warms it up (warmUp) and snapshots the running VM. The VM is
// killed whatever happens.
func (s *Service) bake(ctx context.Context, teamID, name, template string, memMiB int, b *bundle, cmd string, env map[string]string) (pandastack.Snapshot, error) {
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
	conn, err := g.DialPort(ctx, shimPort)
	if err != nil {
		return fmt.Errorf("warm up the runtime: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := conn.Write([]byte(`{"warmup":true,"event":null,"context":{"invocation_id":"warm-up","trigger":"api"}}` + "\n")); err != nil {
		return fmt.Errorf("warm up the runtime: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(conn, 1<<20)).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("warm up the runtime: %w", err)
	}
	var reply shimReply
	if err := json.Unmarshal(line, &reply); err != nil || !reply.OK {
		return fmt.Errorf("warm up the runtime: it answered %q", bytes.TrimSpace(line))
	}
	return nil
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
