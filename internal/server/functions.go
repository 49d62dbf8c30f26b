package server

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/functions"
	"github.com/pandastack/pandastack/internal/hostapi"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// openFunctions assembles the functions product and its cron over the
// engine: invocations are sandboxes (counted against the team's quotas)
// restored from each version's snapshot. Invocations a previous run left
// unfinished are marked as errors (their VMs ended with it).
func (s *Server) openFunctions(ctx context.Context) error {
	engine := registry.Engine{Engine: s.engine, Registry: s.registry}
	sbx := sandboxes.New(sandboxes.Config{Store: s.store, Engine: engine, Logger: s.log, Quotas: s.quotas})
	s.fns = functions.New(functions.Config{Store: s.store, Sandboxes: sbx, Engine: engine, Secrets: s.secrets, Records: s.store,
		Logger: s.log.With("component", "functions"), Routes: s.routes, Domain: s.domain(), StatusFor: api.StatusForCode,
		Prewarm: s.prewarmSnapshot, PrewarmSize: s.cfg.PoolSize, Resolve: s.registry.Resolve, Snapshots: s.store,
		NodeHelloAddon: s.nodeHelloAddon()})
	s.cron = cron.New(cron.Config{Store: s.store, Invoker: s.fns, Logger: s.log.With("component", "cron")})
	if err := s.fns.RouteAll(ctx); err != nil {
		return err
	}
	return s.fns.Recover(ctx)
}

// NodeHelloName is the Node function shim's hello addon, built by
// scripts/setup beside pandastack-guest (functions.Config.NodeHelloAddon).
const NodeHelloName = "pandastack-node-hello.node"

// NodeHelloPath is where the addon is for the guest agent at agentPath.
func NodeHelloPath(agentPath string) string {
	return filepath.Join(filepath.Dir(agentPath), NodeHelloName)
}

// nodeHelloAddon reads the addon from beside the guest agent; without it
// fresh Node invocations wait for the agent's hello.
func (s *Server) nodeHelloAddon() []byte {
	p := NodeHelloPath(s.cfg.AgentPath)
	b, err := os.ReadFile(p)
	if err != nil {
		s.log.Warn("no Node hello addon: fresh Node function invocations wait for the guest agent's hello (scripts/setup builds it)", "path", p, "err", err)
		return nil
	}
	return b
}

// prewarmSnapshot keeps n QEMU processes prepared for snapshot id on this
// host (0: drops them), for a function version's fresh invocations.
func (s *Server) prewarmSnapshot(ctx context.Context, id string, n int) error {
	ref := hostapi.SnapshotRef{ID: id}
	if n > 0 {
		sn, err := s.store.GetSnapshot(ctx, id)
		if err != nil {
			return err
		}
		ref = hostapi.SnapshotRef{ID: sn.ID, Template: sn.Template, TemplateID: sn.TemplateID, ObjectKey: sn.ObjectKey}
	}
	return s.agent.PrewarmSnapshot(ctx, ref, n)
}

// stopFunctions, at the server's stop, ends the invocations in flight
// (recorded as ended by the stop; cron's runs left open, to be delivered
// again at the next start) and waits, at most 15 s,
// until they are recorded and their VMs killed: while the engine still
// runs, before the store closes.
func (s *Server) stopFunctions(ctx context.Context) {
	if s.fns == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s.cron.Stop() // first: cron's runs the stop ends are delivered again
	if err := s.fns.Close(ctx); err != nil {
		s.log.Warn("stop functions", "err", err)
	}
	done := make(chan struct{})
	go func() {
		s.cron.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("stop functions: cron runs still ending")
	}
}
