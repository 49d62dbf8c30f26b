package functions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// MaxLogBytes bounds the output kept per invocation.
const MaxLogBytes = 1 << 20

// InvokeOptions says how an invocation was asked for.
type InvokeOptions struct {
	// Async answers at once with the queued invocation; it runs in the
	// background (poll GetInvocation).
	Async bool
	// Trigger is "api" (default) or "cron".
	Trigger string
	// ExecutionID is the stable id of a cron occurrence (context
	// execution_id); ScheduledTime its time.
	ExecutionID   string
	ScheduledTime time.Time
}

// Invoke runs team's function name on event (JSON): in a fresh microVM
// restored from the latest version's snapshot, killed afterwards. A full
// queue is ERateLimited; a handler that raises is an Invocation with
// Status failed and Error set (not a Go error).
func (s *Service) Invoke(ctx context.Context, teamID, name string, event []byte, o InvokeOptions) (Invocation, error) {
	if len(event) > MaxEventBytes {
		return Invocation{}, pandastack.Errorf(pandastack.ETooLarge, "the event is %d bytes; at most %d are allowed", len(event), MaxEventBytes)
	}
	if len(bytes.TrimSpace(event)) == 0 {
		event = []byte("null")
	}
	if !json.Valid(event) {
		return Invocation{}, pandastack.Errorf(pandastack.EInvalid, "the request body must be JSON (the event)")
	}
	ph := startPhases()
	f, err := s.cfg.Store.GetFunction(ctx, teamID, name)
	if err != nil {
		return Invocation{}, err
	}
	ph.mark("lookup")
	wait, err := s.admit(f.ID, f.Latest.MaxConcurrency)
	if err != nil {
		return Invocation{}, err
	}
	if o.Trigger == "" {
		o.Trigger = "api"
	}
	inv := Invocation{ID: pandastack.NewID("inv_"), FunctionID: f.ID, Function: f.Name, TeamID: teamID, Version: f.LatestVersion,
		Trigger: o.Trigger, ExecutionID: o.ExecutionID, Status: StatusQueued, CreatedAt: time.Now().UTC()}
	start := func(ctx context.Context) Invocation {
		release, err := wait(ctx)
		if err != nil {
			s.finish(ctx, &inv, StatusError, nil, &FunctionError{Type: "NotRun", Message: pandastack.ErrorMessage(err)}, "")
			return inv
		}
		defer release()
		ph.mark("queue")
		s.execute(ctx, f, &inv, event, o, ph)
		return inv
	}
	if err := s.cfg.Store.PutInvocation(ctx, inv); err != nil {
		go func() { // give back the slot or queue place taken
			if release, err := wait(context.WithoutCancel(ctx)); err == nil {
				release()
			}
		}()
		return Invocation{}, err
	}
	ph.mark("record_queued")
	if o.Async {
		s.async.Add(1)
		go func() {
			defer s.async.Done()
			start(context.WithoutCancel(ctx))
		}()
		return inv, nil
	}
	return start(ctx), nil
}

// execute runs inv and records how it ended.
func (s *Service) execute(ctx context.Context, f Function, inv *Invocation, event []byte, o InvokeOptions, ph *phases) {
	log := s.log.With("function", f.Name, "invocation", inv.ID)
	if s.stopping.Err() != nil {
		s.finish(ctx, inv, StatusError, nil, stoppedErr(false), "")
		return
	}
	inv.Status = StatusRunning
	if err := s.cfg.Store.PutInvocation(ctx, *inv); err != nil {
		log.Error("record invocation", "err", err)
	}
	ph.mark("record_running")
	v := f.Latest
	t0 := time.Now()
	warm := v.Isolation == IsolationWarm
	// A fresh VM's shim greets its guest itself (hello.go): its agent's
	// session is deferred, and begun only if the shim cannot.
	selfHello := !warm && s.shimHellos(v)
	sbID, expires := "", time.Time{}
	started := func() {} // gives back the start slot (starts.go)
	if warm {
		sbID = s.takeWarm(ctx, f.ID, v.SnapshotID, v.Timeout)
	}
	if sbID == "" {
		ttl := int64((v.Timeout+time.Minute)/time.Second) + 60
		if warm {
			ttl = int64(warmTTL / time.Second)
		}
		expires = time.Now().Add(time.Duration(ttl) * time.Second)
		meta := map[string]string{"pandastack.function": f.Name, "pandastack.invocation": inv.ID, vmLabel: "1"}
		if warm {
			meta["pandastack.function.isolation"] = IsolationWarm
		}
		release, err := s.startSlot(ctx)
		ph.mark("start_wait")
		var sb pandastack.Sandbox
		if err == nil {
			sb, err = s.cfg.Sandboxes.Create(ctx, inv.TeamID, sandboxes.CreateParams{Snapshot: v.SnapshotID, TTLSeconds: &ttl, Metadata: meta,
				ManagedBy: "function:" + f.Name, DeferSession: selfHello})
			ph.mark("create")
			if err != nil {
				release()
			} else {
				started = holdStart(release)
				defer started() // also when the call is not reached
			}
		}
		if err != nil {
			log.Error("start invocation VM", "err", err)
			s.finish(ctx, inv, StatusError, nil, &FunctionError{Type: "StartFailed", Message: "could not start the function's VM: " + pandastack.ErrorMessage(err)}, "")
			inv.Err = err
			return
		}
		sbID = sb.ID
	} else {
		expires = time.Now().Add(warmTTL) // an upper bound; takeWarm re-checks
	}
	keep := false
	defer func() {
		// A fresh VM, or a warm one that timed out or failed, is killed:
		// that ends the handler and every process it started. After a
		// reply (the handler returned or raised) the kill runs after the
		// answer, off its path (Wait waits for it); a timeout or a
		// runtime that did not answer is killed before the answer says
		// so.
		if keep && s.putWarm(f.ID, v.SnapshotID, sbID, expires, v.MaxConcurrency) {
			return
		}
		after := func() {
			// Not for a function deleted meanwhile: its snapshot goes.
			if !warm && s.gateOpen(f.ID) {
				s.prewarm(context.WithoutCancel(ctx), f.ID, v.SnapshotID)
			}
		}
		if inv.Status == StatusSucceeded || inv.Status == StatusFailed {
			s.teardown(context.WithoutCancel(ctx), log, sbID, after)
			return
		}
		if err := s.cfg.Engine.Kill(context.WithoutCancel(ctx), sbID, pandastack.StateKilled); err != nil {
			log.Error("kill invocation VM", "sandbox", sbID, "err", err)
		}
		after()
	}()
	tStarted := time.Now()
	hello := "agent" // who greeted the guest after its restore (hello.go)
	defer func() {
		log.Info("invocation ended", "status", inv.Status, "sandbox", sbID, "isolation", v.Isolation, "hello", hello,
			"restore_ms", tStarted.Sub(t0).Milliseconds(), "call_ms", time.Since(tStarted).Milliseconds())
	}()
	deadline := time.Now().Add(v.Timeout)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)() // Close: the server stops
	defer func() { ph.log(log, "invocation timing", "status", inv.Status, "sandbox", sbID) }()
	reply, err := call(cctx, s.cfg.Engine, sbID, callMode{fresh: !warm, selfHello: selfHello}, event, ph, map[string]any{
		"invocation_id": inv.ID, "function_name": f.Name, "function_version": f.LatestVersion, "trigger": inv.Trigger,
		"execution_id": o.ExecutionID, "scheduled_time": scheduled(o.ScheduledTime), "deadline_ms": deadline.UnixMilli(),
	})
	started()
	hello = s.noteHello(v, selfHello, reply, err)
	switch {
	case err != nil && !time.Now().Before(deadline) && ctx.Err() == nil:
		s.finish(ctx, inv, StatusTimedOut, nil, &FunctionError{Type: "Timeout",
			Message: fmt.Sprintf("the function did not return within its timeout of %s; its VM was killed", v.Timeout)}, "")
	case err != nil && s.stopping.Err() != nil:
		s.finish(ctx, inv, StatusError, nil, stoppedErr(true), "")
	case err != nil:
		log.Error("invoke", "sandbox", sbID, "err", err)
		s.finish(ctx, inv, StatusError, nil, &FunctionError{Type: "InvokeFailed", Message: "the function's runtime did not answer: " + err.Error()}, "")
	case reply.OK:
		keep = warm
		s.finish(ctx, inv, StatusSucceeded, reply.Result, nil, reply.Logs)
	default:
		keep = warm
		s.finish(ctx, inv, StatusFailed, nil, reply.Error, reply.Logs)
	}
	ph.mark("finish")
}

// shimHellos says whether v's fresh VMs have their shim do the hello's
// part (hello.go): Python's shim can, Node's with the hello addon
// (Config.NodeHelloAddon), unless one of v's calls found it could not.
func (s *Service) shimHellos(v Version) bool {
	if _, no := s.helloless.Load(v.SnapshotID); no {
		return false
	}
	return v.Runtime == RuntimePython || (v.Runtime == RuntimeNode && s.shims.nodeHello)
}

// noteHello says who greeted a call's guest after its restore, "shim" or
// "agent", from the call's outcome. A shim that was asked and could not
// (one baked before it could, or without the privileges) marks v's
// snapshot: its calls go to the agent's hello from then on.
func (s *Service) noteHello(v Version, asked bool, reply shimReply, err error) string {
	if reply.Seeded {
		return "shim"
	}
	if asked && err == nil {
		s.helloless.Store(v.SnapshotID, true)
	}
	return "agent"
}

// stoppedErr is how an invocation the server's stop ended is recorded:
// begun (its VM killed) or not.
func stoppedErr(begun bool) *FunctionError {
	if begun {
		return &FunctionError{Type: "ServerStopped", Message: "the server stopped during the invocation; its VM was killed"}
	}
	return &FunctionError{Type: "ServerStopped", Message: "the server stopped before the invocation ran"}
}

func scheduled(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// finish records how inv ended.
func (s *Service) finish(ctx context.Context, inv *Invocation, status string, result json.RawMessage, ferr *FunctionError, logs string) {
	now := time.Now().UTC()
	if len(logs) > MaxLogBytes {
		logs = logs[len(logs)-MaxLogBytes:]
	}
	inv.Status, inv.Result, inv.Error, inv.Logs, inv.EndedAt = status, result, ferr, logs, &now
	inv.DurationMs = now.Sub(inv.CreatedAt).Milliseconds()
	if err := s.cfg.Store.PutInvocation(context.WithoutCancel(ctx), *inv); err != nil {
		s.log.Error("record invocation", "invocation", inv.ID, "err", err)
	}
}

// shimReply is what the shim answers an invocation with (one JSON line;
// the request is one line too: {"event", "context"}). Seeded answers a
// request with a hello (hello.go): the shim did the hello's part and
// ran the call; without it, the call did not run.
type shimReply struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  *FunctionError  `json:"error"`
	Logs   string          `json:"logs"`
	Seeded bool            `json:"seeded"`
}

// callMode says how call reaches the shim: fresh (a VM of this one call)
// takes the VM's direct port when its machine has one; selfHello (the
// VM's agent session deferred) sends the request with a hello.
type callMode struct{ fresh, selfHello bool }

// call hands event and the context to the shim in sandbox id and reads
// its reply, within ctx's deadline: on the VM's direct port when fresh
// and its machine has one, else through the agent.
func call(ctx context.Context, engine pandastack.Engine, id string, mode callMode, event []byte, ph *phases, fnctx map[string]any) (shimReply, error) {
	var reply shimReply
	g, err := engine.Guest(ctx, id)
	if err != nil {
		return reply, fmt.Errorf("reach the VM: %w", err)
	}
	ph.mark("guest")
	var conn net.Conn
	if mode.fresh {
		conn, err = dialDirect(ctx, g)
		if err != nil {
			return reply, fmt.Errorf("dial the runtime: %w", err)
		}
	}
	if conn != nil {
		ph.mark("dial")
		defer conn.Close()
		defer deadline(ctx, conn)()
		if mode.selfHello {
			reply, err := helloCall(ctx, conn, event, fnctx)
			if err != nil || reply.Seeded {
				ph.mark("call")
				return reply, err
			}
			// The shim did not do the hello's part (one baked before
			// it could, or without the privileges): the agent does.
			if _, err := g.Ping(ctx); err != nil {
				return reply, fmt.Errorf("begin the guest's session: %w", err)
			}
			ph.mark("session")
		}
	}
	// now_ms: the shim holds the handler until the guest's clock is the
	// host's (shim.py, wait_clock).
	line, err := json.Marshal(map[string]any{"event": json.RawMessage(event), "context": fnctx, "now_ms": time.Now().UnixMilli()})
	if err != nil {
		return reply, err
	}
	line = append(line, '\n')
	sent := false
	if conn == nil {
		if conn, sent, err = dialShim(ctx, g, line); err != nil {
			return reply, fmt.Errorf("dial the runtime: %w", err)
		}
		ph.mark("dial")
		defer conn.Close()
		defer deadline(ctx, conn)()
	}
	if !sent {
		if _, err := conn.Write(line); err != nil {
			return reply, deadlineErr(ctx, fmt.Errorf("send the event: %w", err))
		}
	}
	reply, err = readReply(ctx, conn)
	ph.mark("call")
	return reply, err
}

// deadline ends conn's reads and writes at ctx's deadline or its end,
// until the returned stop is called.
func deadline(ctx context.Context, conn net.Conn) (stop func() bool) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
}

// readReply reads and decodes the shim's one-line reply.
func readReply(ctx context.Context, conn net.Conn) (shimReply, error) {
	var reply shimReply
	data, err := bufio.NewReaderSize(io.LimitReader(conn, MaxEventBytes+2*MaxLogBytes), 64<<10).ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(data) > 0) {
		return reply, deadlineErr(ctx, fmt.Errorf("read the reply: %w", err))
	}
	if err := json.Unmarshal(data, &reply); err != nil {
		return reply, fmt.Errorf("decode the reply: %w", err)
	}
	return reply, nil
}

func deadlineErr(ctx context.Context, err error) error {
	var ne net.Error
	if ctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return errors.Join(ctx.Err(), err)
	}
	return err
}
