package apps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps/detect"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// Paths inside a build machine (and so its releases).
const (
	guestSrcTar = "/tmp/pandastack-src.tar"
	guestAppDir = "/app"
	guestAppLog = "/tmp/pandastack-app.log"
)

// Deploy queues a deploy of ref (the app's branch when "") and runs it in
// the background; the returned deploy is queued.
func (s *Service) Deploy(ctx context.Context, teamID, name, ref string) (Deploy, error) {
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return Deploy{}, err
	}
	return s.startDeploy(ctx, a, ref, "")
}

func (s *Service) startDeploy(ctx context.Context, a App, ref, delivery string) (Deploy, error) {
	return s.startDeployAs(ctx, a, ref, delivery, "", 0)
}

// startDeployAs queues a deploy with id ("" for a new one), of the app or
// of its preview of pull request preview (0: the app). An app with no
// git_url deploys from its git remote.
func (s *Service) startDeployAs(ctx context.Context, a App, ref, delivery, id string, preview int) (Deploy, error) {
	if a.GitURL == "" || id != "" {
		if !s.hasRepo(a) {
			return Deploy{}, pandastack.Errorf(pandastack.EConflict, "app %s has no git_url and nothing was pushed to its git remote yet (git push %s)", a.Name, GitRemotePath(a.Name))
		}
		a.source = s.repoDir(a)
	}
	if id == "" {
		id = pandastack.NewID("dep_")
	}
	if ref == "" {
		ref = a.Branch
	}
	if err := checkRef(ref); err != nil {
		return Deploy{}, err
	}
	env, err := s.openEnv(a)
	if err != nil {
		return Deploy{}, err
	}
	t := now()
	d := Deploy{ID: id, AppID: a.ID, Status: StatusQueued, Ref: ref, DeliveryID: delivery, Preview: preview, CreatedAt: t, UpdatedAt: t}
	l := newDeployLog(env)
	l.printf("deploy %s of %s (%s) queued", d.ID, a.sourceName(), ref)
	d.Log = l.String()
	if err := s.cfg.Store.PutDeploy(ctx, d); err != nil {
		return Deploy{}, err
	}
	dctx, cancel := context.WithTimeout(s.ctx, s.cfg.BuildTimeout+s.cfg.HealthTimeout*2+5*time.Minute)
	s.mu.Lock()
	s.running[d.ID] = cancel
	s.logs[d.ID] = l
	s.mu.Unlock()
	s.wg.Add(1)
	go s.run(dctx, a, d, env, l)
	return d, nil
}

// run builds and releases one deploy, one per app at a time, and records
// how it ended.
func (s *Service) run(ctx context.Context, a App, d Deploy, env map[string]string, l *deployLog) {
	defer s.wg.Done()
	log := s.log.With("app", a.Name, "deploy", d.ID)
	defer func() {
		s.mu.Lock()
		if cancel := s.running[d.ID]; cancel != nil {
			cancel()
		}
		delete(s.running, d.ID)
		delete(s.logs, d.ID)
		s.mu.Unlock()
	}()
	lock := s.appLock(a.ID)
	lock.Lock()
	defer lock.Unlock()
	err := ctx.Err()
	if err == nil {
		err = s.release(ctx, a, &d, env, l)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("cancelled (the app was deleted or the server stopped): %w", err)
		}
		d.Status, d.Error = StatusFailed, err.Error()
		l.printf("deploy failed: %s", d.Error)
		log.Info("deploy failed", "err", err)
	} else {
		log.Info("deploy live", "commit", d.Commit, "framework", d.Framework)
	}
	if d.Preview != 0 && !s.previewExists(context.WithoutCancel(ctx), a.ID, d.Preview) {
		// Its pull request closed while it waited: the preview's records
		// are gone, and this one goes with them.
		return
	}
	s.put(context.WithoutCancel(ctx), &d, l)
}

// put writes the deploy with its log so far.
func (s *Service) put(ctx context.Context, d *Deploy, l *deployLog) {
	d.Log, d.UpdatedAt = l.String(), now()
	if err := s.cfg.Store.PutDeploy(ctx, *d); err != nil {
		s.log.Error("record deploy", "deploy", d.ID, "err", err)
	}
}

// release is one deploy: clone, detect, build in a machine, start, check,
// snapshot, restore as a service machine, check, switch.
func (s *Service) release(ctx context.Context, a App, d *Deploy, env map[string]string, l *deployLog) error {
	d.Status = StatusBuilding
	s.put(ctx, d, l)
	if err := os.MkdirAll(s.cfg.WorkDir, 0o700); err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	work, err := os.MkdirTemp(s.cfg.WorkDir, "deploy-")
	if err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	l.printf("cloning %s (%s)", a.sourceName(), d.Ref)
	url := a.GitURL
	if a.source != "" {
		url = a.source
	}
	if d.Commit, err = s.cloneFor(ctx, a, d, url, src, l); err != nil {
		if a.source != "" {
			// The remote's place on the server's disk is not the user's business.
			return errors.New(strings.ReplaceAll(err.Error(), a.source, a.sourceName()))
		}
		return err
	}
	plan, err := detect.Dir(src)
	if err != nil && a.StartCommand == "" {
		return fmt.Errorf("detect framework: %w", err)
	}
	if a.BuildCommand != "" {
		plan.Build = a.BuildCommand
	}
	if a.StartCommand != "" {
		plan.Start = a.StartCommand
		if plan.Framework == "" {
			plan.Framework = detect.Custom
		}
	}
	if a.Port != 0 {
		plan.Port = a.Port
	}
	if plan.Port == 0 {
		plan.Port = 8080
	}
	d.Framework = string(plan.Framework)
	l.printf("framework %s (%s); port %d", plan.Framework, plan.Reason, plan.Port)
	s.put(ctx, d, l)
	deps, cacheable := s.depsFor(src, plan)
	var tarball bytes.Buffer
	if err := tarDir(src, &tarball); err != nil {
		return err
	}
	os.RemoveAll(src)

	runEnv := appRunEnv(plan, env)
	ttl := int64((s.cfg.BuildTimeout + s.cfg.HealthTimeout + 5*time.Minute) / time.Second)
	meta := map[string]string{"app": a.Name, "deploy": d.ID}
	if d.Preview != 0 {
		meta["preview"] = strconv.Itoa(d.Preview)
	}
	bp := sizeBuild(sandboxes.CreateParams{Template: s.cfg.Template, TTLSeconds: &ttl,
		Metadata: with(meta, "role", "build"), ManagedBy: "app:" + a.Name}, plan)
	if bp.MemoryMiB != 0 {
		l.printf("starting a build machine from template %s with %d MiB of memory (framework %s)", s.cfg.Template, bp.MemoryMiB, plan.Framework)
	} else {
		l.printf("starting a build machine from template %s", s.cfg.Template)
	}
	builder, err := s.cfg.Machines.Create(ctx, a.TeamID, bp)
	if err != nil {
		return fmt.Errorf("start build machine: %w", err)
	}
	builderLive := true
	defer func() {
		if builderLive {
			s.kill(builder.ID)
		}
	}()
	g, err := s.cfg.Engine.Guest(ctx, builder.ID)
	if err != nil {
		return fmt.Errorf("reach build machine: %w", err)
	}
	if _, err := g.WriteFile(ctx, guestSrcTar, 0o600, &tarball); err != nil {
		return fmt.Errorf("copy source into the build machine: %w", err)
	}
	if code, err := s.exec(ctx, g, "mkdir -p "+guestAppDir+" && tar -xf "+guestSrcTar+" -C "+guestAppDir+" && rm "+guestSrcTar, nil, nil); err != nil || code != 0 {
		return fmt.Errorf("unpack source in the build machine: exit %d: %v", code, err)
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.BuildTimeout)
	defer cancel()
	restored := cacheable && s.restoreDeps(bctx, g, a, deps, l)
	for _, step := range []struct{ what, cmd string }{{"install", plan.Install}, {"build", plan.Build}} {
		if step.cmd == "" || (step.what == "install" && restored) {
			continue
		}
		l.printf("$ %s", step.cmd)
		code, err := s.exec(bctx, g, step.cmd, runEnv, l)
		if bctx.Err() != nil {
			return fmt.Errorf("%s command `%s` did not finish within %s", step.what, step.cmd, s.cfg.BuildTimeout)
		}
		if err != nil {
			return fmt.Errorf("%s command `%s`: %w", step.what, step.cmd, err)
		}
		if code != 0 {
			return fmt.Errorf("%s command `%s` exited with status %d", step.what, step.cmd, code)
		}
		if step.what == "install" && cacheable {
			s.saveDeps(bctx, g, a, deps, l)
		}
	}
	d.Status = StatusDeploying
	l.printf("$ %s   (the app, on port %d)", plan.Start, plan.Port)
	s.put(ctx, d, l)
	start := pandastack.ExecRequest{Cmd: "exec sh -c " + shQuote(plan.Start) + " >>" + guestAppLog + " 2>&1",
		Cwd: guestAppDir, Env: runEnv, Background: true}
	if _, err := g.Exec(ctx, start, nil, func(pandastack.ExecEvent) error { return nil }); err != nil {
		return fmt.Errorf("start the app: %w", err)
	}
	host := s.deployHost(a.Name, d.Preview)
	if err := s.healthy(ctx, g, builder.ID, host, plan.Port, a.HealthPath, s.healthTimeout(a, plan), l); err != nil {
		return err
	}
	l.printf("healthy; baking the running app into a snapshot")
	sn, err := s.cfg.Engine.Snapshot(ctx, builder.ID, "app-"+a.Name+"-"+d.ID)
	if err != nil {
		return fmt.Errorf("snapshot the running app: %w", err)
	}
	builderLive = false
	s.kill(builder.ID)
	ah := int64(a.AutoHibernateSeconds)
	m, err := s.cfg.Machines.Create(ctx, a.TeamID, sandboxes.CreateParams{Snapshot: sn.ID, Lifetime: string(pandastack.LifetimeService),
		AutoHibernateSeconds: &ah, Metadata: with(meta, "role", "release"), ManagedBy: "app:" + a.Name})
	if err != nil {
		s.deleteSnapshot(sn.ID)
		return fmt.Errorf("start the release from its snapshot: %w", err)
	}
	rel := Release{ID: pandastack.NewID("rel_"), AppID: a.ID, DeployID: d.ID, SnapshotID: sn.ID, MachineID: m.ID, Port: plan.Port,
		Preview: d.Preview, CreatedAt: now()}
	drop := func() {
		s.kill(m.ID)
		s.deleteSnapshot(sn.ID)
	}
	rg, err := s.cfg.Engine.Guest(ctx, m.ID)
	if err == nil {
		err = s.healthy(ctx, rg, m.ID, host, plan.Port, a.HealthPath, s.healthTimeout(a, plan), l)
	}
	if err != nil {
		drop()
		return fmt.Errorf("the release restored from the snapshot: %w", err)
	}
	if err := s.cfg.Store.PutRelease(context.WithoutCancel(ctx), rel); err != nil {
		drop()
		return fmt.Errorf("record release: %w", err)
	}
	if d.Preview != 0 {
		return s.promotePreview(ctx, a, d, rel, l)
	}
	_, err = s.promote(ctx, a.ID, d, rel, l)
	return err
}

// promote switches the app's route to rel (atomically), makes d live and
// the previous live deploy superseded; the previous release drains and is
// kept warm for rollback (keepWarm), and releases beyond KeepReleases go.
// It returns when the route switched.
func (s *Service) promote(ctx context.Context, appID string, d *Deploy, rel Release, l *deployLog) (time.Time, error) {
	ctx = context.WithoutCancel(ctx)
	a, err := s.cfg.Store.GetAppByID(ctx, appID)
	if err != nil {
		return time.Time{}, fmt.Errorf("the app went away: %w", err)
	}
	b := s.backendOf(a.ID)
	if b == nil {
		return time.Time{}, fmt.Errorf("the app %s has no route", a.Name)
	}
	prevMachine := b.current()
	gen := b.set(rel.MachineID, rel.Port)
	switched := time.Now()
	if err := s.cfg.Store.SetLiveDeploy(ctx, a.ID, d.ID); err != nil {
		return switched, err
	}
	d.Status, d.Error = StatusLive, ""
	l.printf("live: %s now serves %s", rel.MachineID, s.host(a.Name))
	s.put(ctx, d, l)
	if a.LiveDeployID != "" && a.LiveDeployID != d.ID {
		if prev, err := s.cfg.Store.GetDeploy(ctx, a.ID, a.LiveDeployID); err == nil {
			prev.Status, prev.UpdatedAt = StatusSuperseded, now()
			prev.Log += fmt.Sprintf("superseded by deploy %s\n", d.ID)
			_ = s.cfg.Store.PutDeploy(ctx, prev)
		}
	}
	if prevMachine != "" && prevMachine != rel.MachineID {
		s.keepWarm(b, prevMachine, gen)
	}
	return switched, s.prune(ctx, a.ID, d.ID, a.LiveDeployID)
}

// keepWarm lets the release that was just replaced finish the requests it
// has (Drain) and keeps it running for a fast rollback (RollbackWindow):
// a rollback then needs no wake, only a health check and the switch.
// Then it hibernates — kept for a slower rollback, its memory on disk —
// unless the app switched since: a rollback made it live again, or a
// newer deploy made another release the previous one (and prune dropped
// this one). At most one release per app is kept warm, for a bounded
// time; the team's quotas count it either way (hibernated machines
// count too).
func (s *Service) keepWarm(b *backend, machine string, gen uint64) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-time.After(s.cfg.Drain + s.cfg.RollbackWindow):
		case <-s.ctx.Done():
			// The server stops; the machine outlives it (a service
			// machine) and Start gives it a new window.
			return
		}
		if b.gen.Load() != gen {
			return
		}
		if _, err := s.cfg.Engine.Hibernate(context.Background(), machine); err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
			s.log.Debug("hibernate previous release", "machine", machine, "err", err)
		}
	}()
}

// prune drops an app's releases beyond KeepReleases, oldest first: never
// the live one nor the one that was live before it (the rollback target).
func (s *Service) prune(ctx context.Context, appID, liveDeploy, prevDeploy string) error {
	rels, err := s.cfg.Store.ListReleases(ctx, appID)
	if err != nil {
		return nil
	}
	keep := map[string]bool{liveDeploy: true}
	for _, r := range rels {
		if r.DeployID == prevDeploy {
			keep[prevDeploy] = true
		}
	}
	for _, r := range rels {
		if len(keep) >= KeepReleases {
			break
		}
		keep[r.DeployID] = true
	}
	for _, r := range rels {
		if keep[r.DeployID] {
			continue
		}
		if err := s.dropRelease(ctx, r); err != nil {
			s.log.Warn("drop old release", "release", r.ID, "err", err)
		}
	}
	return nil
}

// exec runs cmd in /app of a build machine, its output to out (nil:
// discarded), and returns its exit status.
func (s *Service) exec(ctx context.Context, g pandastack.Guest, cmd string, env map[string]string, out *deployLog) (int, error) {
	req := pandastack.ExecRequest{Cmd: cmd, Env: env}
	if !strings.HasPrefix(cmd, "mkdir -p "+guestAppDir) {
		req.Cwd = guestAppDir
	}
	res, err := g.Exec(ctx, req, nil, func(ev pandastack.ExecEvent) error {
		if out != nil && (ev.Type == "stdout" || ev.Type == "stderr") {
			out.Write(ev.Data)
		}
		return nil
	})
	if err != nil {
		return -1, err
	}
	if res.Signal != "" {
		return 128, fmt.Errorf("killed by signal %s", res.Signal)
	}
	return res.ExitCode, nil
}

func (s *Service) kill(id string) {
	if err := s.cfg.Engine.Kill(context.Background(), id, pandastack.StateKilled); err != nil {
		s.log.Warn("kill app machine", "machine", id, "err", err)
	}
}

func (s *Service) deleteSnapshot(id string) {
	if err := s.cfg.Engine.DeleteSnapshot(context.Background(), id); err != nil {
		s.log.Warn("delete app snapshot", "snapshot", id, "err", err)
	}
}

func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
