package apps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/pandastack/pandastack"
)

// MaxPreviews is how many pull requests of one app may have a preview at
// once; a pull request opened past it gets none (quota_exceeded). Each
// preview's build and release machines count in the team's quotas too.
const MaxPreviews = 10

// pullRequestEvent is what a pull_request delivery carries that matters
// here.
type pullRequestEvent struct {
	Action      string `json:"action"`
	Number      int    `json:"number"`
	PullRequest struct {
		Number int `json:"number"`
		Head   struct {
			Ref  string `json:"ref"`
			SHA  string `json:"sha"`
			Repo prRepo `json:"repo"`
		} `json:"head"`
		Base struct {
			Ref  string `json:"ref"`
			Repo prRepo `json:"repo"`
		} `json:"base"`
	} `json:"pull_request"`
}

// prRepo names the repository a pull request's head or base is in.
type prRepo struct {
	FullName string `json:"full_name"`
}

// previewKey is the key of a preview's backend among the apps'.
func previewKey(appID string, number int) string {
	return appID + "#pr-" + strconv.Itoa(number)
}

// previewRef is the ref GitHub serves a pull request's head at.
func previewRef(number int) string { return "refs/pull/" + strconv.Itoa(number) + "/head" }

// deployHost is where a deploy is served: NAME.apps.DOMAIN, or
// pr-N--NAME.apps.DOMAIN for the preview of pull request N (app names
// have no "--", so the two never collide).
func (s *Service) deployHost(name string, preview int) string {
	if preview == 0 {
		return s.host(name)
	}
	return "pr-" + strconv.Itoa(preview) + "--" + s.host(name)
}

// pullRequest handles a verified pull_request delivery for app a: opened,
// reopened and synchronize deploy the pull request's head as its preview
// (a new one, or a redeploy of it); closed removes the preview; other
// actions, pull requests into other branches than the app's, pull
// requests from forks (a preview gets the app's env) and an app with no
// git_url are ignored. Every delivery id counts once: a replay
// does nothing, whatever its action.
func (s *Service) pullRequest(ctx context.Context, a App, delivery string, body []byte) (HookResult, error) {
	var ev pullRequestEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return HookResult{}, pandastack.Errorf(pandastack.EInvalid, "the pull_request payload is not JSON: %v", err)
	}
	n := ev.Number
	if n == 0 {
		n = ev.PullRequest.Number
	}
	if n <= 0 || n > 1_000_000_000 {
		return HookResult{}, pandastack.Errorf(pandastack.EInvalid, "the pull_request payload has no pull request number")
	}
	switch ev.Action {
	case "opened", "reopened", "synchronize", "closed":
	default:
		return HookResult{Ignored: "pull request action " + ev.Action + " is not handled"}, nil
	}
	if err := s.cfg.Store.RecordDelivery(ctx, a.ID, delivery); err != nil {
		if pandastack.ErrorCode(err) == pandastack.EConflict {
			return HookResult{Ignored: "delivery " + delivery + " was already received"}, nil
		}
		return HookResult{}, err
	}
	if ev.Action == "closed" {
		removed, err := s.closePreview(ctx, a, n)
		if err != nil {
			return HookResult{}, err
		}
		if !removed {
			return HookResult{Ignored: fmt.Sprintf("pull request %d has no preview", n)}, nil
		}
		return HookResult{Removed: true}, nil
	}
	switch {
	case ev.PullRequest.Base.Ref != "" && ev.PullRequest.Base.Ref != a.Branch:
		return HookResult{Ignored: "pull request into " + ev.PullRequest.Base.Ref + ", not the app's branch (" + a.Branch + ")"}, nil
	case a.GitURL == "":
		return HookResult{Ignored: "the app has no git_url to fetch pull requests from"}, nil
	case ev.PullRequest.Head.Repo.FullName != "" && ev.PullRequest.Base.Repo.FullName != "" &&
		ev.PullRequest.Head.Repo.FullName != ev.PullRequest.Base.Repo.FullName:
		// A preview's build and app get the app's env, secrets included:
		// code from someone else's fork must not.
		return HookResult{Ignored: "pull request from the fork " + ev.PullRequest.Head.Repo.FullName +
			": previews are built only from branches of the app's own repository (they get the app's env)"}, nil
	}
	return s.openPreview(ctx, a, n, ev.PullRequest.Head.Ref, ev.PullRequest.Head.SHA, delivery)
}

// openPreview records pull request n's preview (its route serves 503
// until a deploy goes live) and queues a deploy of its head.
func (s *Service) openPreview(ctx context.Context, a App, n int, headRef, headSHA, delivery string) (HookResult, error) {
	if headRef != "" {
		if err := checkRef(headRef); err != nil {
			return HookResult{}, err
		}
	}
	p, err := s.cfg.Store.GetPreview(ctx, a.ID, n)
	switch {
	case pandastack.ErrorCode(err) == pandastack.ENotFound:
		all, err := s.cfg.Store.ListPreviews(ctx, a.ID)
		if err != nil {
			return HookResult{}, err
		}
		if len(all) >= MaxPreviews {
			return HookResult{}, pandastack.Errorf(pandastack.EQuota, "app %s has %d previews, the most it may have: close a pull request first", a.Name, len(all))
		}
		p = Preview{AppID: a.ID, Number: n, CreatedAt: now()}
	case err != nil:
		return HookResult{}, err
	}
	if s.backendOf(previewKey(a.ID, n)) == nil && s.registerHost(previewKey(a.ID, n), s.deployHost(a.Name, n), a.Name) == nil {
		return HookResult{}, pandastack.Errorf(pandastack.EConflict, "the host %s is taken on this server", s.deployHost(a.Name, n))
	}
	p.HeadRef, p.HeadSHA, p.UpdatedAt = headRef, headSHA, now()
	if err := s.cfg.Store.PutPreview(ctx, p); err != nil {
		return HookResult{}, err
	}
	d, err := s.startDeployAs(ctx, a, previewRef(n), delivery, "", n)
	if err != nil {
		return HookResult{}, err
	}
	p.DeployID = d.ID
	if err := s.cfg.Store.PutPreview(ctx, p); err != nil {
		return HookResult{}, err
	}
	p = s.presentPreview(ctx, a, p)
	return HookResult{Deploy: &d, Preview: &p}, nil
}

// cloneFor clones what deploy d builds into dir. A preview fetches its
// pull request's refs/pull/N/head, which GitHub serves; a git server that
// has no such ref is asked for the head branch instead.
func (s *Service) cloneFor(ctx context.Context, a App, d *Deploy, url, dir string, l *deployLog) (string, error) {
	commit, err := clone(ctx, url, d.Ref, dir, s.cfg.MaxRepoBytes, &s.cfg.Git, l)
	if err == nil || d.Preview == 0 || ctx.Err() != nil {
		return commit, err
	}
	p, perr := s.cfg.Store.GetPreview(ctx, a.ID, d.Preview)
	if perr != nil || p.HeadRef == "" {
		return "", err
	}
	l.printf("%v; fetching the pull request's head branch %s instead", err, p.HeadRef)
	if rerr := os.RemoveAll(dir); rerr != nil {
		return "", fmt.Errorf("clean the failed fetch: %w", rerr)
	}
	return clone(ctx, url, p.HeadRef, dir, s.cfg.MaxRepoBytes, &s.cfg.Git, l)
}

// promotePreview makes rel serve its preview's host and d the preview's
// live deploy. The release it replaces finishes its requests (Drain) and
// goes with its snapshot: a preview keeps no release for rollback.
func (s *Service) promotePreview(ctx context.Context, a App, d *Deploy, rel Release, l *deployLog) error {
	ctx = context.WithoutCancel(ctx)
	b := s.backendOf(previewKey(a.ID, d.Preview))
	p, err := s.cfg.Store.GetPreview(ctx, a.ID, d.Preview)
	if b == nil || err != nil {
		// Closed while it built (closePreview cancels first, so rarely).
		_ = s.dropRelease(ctx, rel)
		return fmt.Errorf("the preview of pull request %d was closed", d.Preview)
	}
	b.set(rel.MachineID, rel.Port)
	prevDeploy := p.LiveDeployID
	p.LiveDeployID, p.UpdatedAt = d.ID, now()
	if err := s.cfg.Store.PutPreview(ctx, p); err != nil {
		return err
	}
	d.Status, d.Error = StatusLive, ""
	l.printf("live: %s now serves %s", rel.MachineID, s.deployHost(a.Name, d.Preview))
	s.put(ctx, d, l)
	if prevDeploy != "" && prevDeploy != d.ID {
		if prev, err := s.cfg.Store.GetDeploy(ctx, a.ID, prevDeploy); err == nil {
			prev.Status, prev.UpdatedAt = StatusSuperseded, now()
			prev.Log += fmt.Sprintf("superseded by deploy %s\n", d.ID)
			_ = s.cfg.Store.PutDeploy(ctx, prev)
		}
	}
	rels, err := s.cfg.Store.ListPreviewReleases(ctx, a.ID, d.Preview)
	if err != nil {
		return nil
	}
	var old []Release
	for _, r := range rels {
		if r.ID != rel.ID {
			old = append(old, r)
		}
	}
	if len(old) == 0 {
		return nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-time.After(s.cfg.Drain):
		case <-s.ctx.Done():
			// The next start's sweepPreviews drops it.
			return
		}
		for _, r := range old {
			if err := s.dropRelease(context.Background(), r); err != nil {
				s.log.Warn("drop replaced preview release", "release", r.ID, "err", err)
			}
		}
	}()
	return nil
}

// closePreview removes pull request n's preview: its running deploys are
// cancelled, its route goes, its release machines are killed, their
// snapshots deleted, and its records forgotten. It reports whether there
// was one.
func (s *Service) closePreview(ctx context.Context, a App, n int) (bool, error) {
	if _, err := s.cfg.Store.GetPreview(ctx, a.ID, n); pandastack.ErrorCode(err) == pandastack.ENotFound {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := s.cancelDeploys(ctx, a.ID, n); err != nil {
		return false, err
	}
	lock := s.appLock(a.ID)
	lock.Lock()
	defer lock.Unlock()
	if err := s.dropPreview(ctx, a, n); err != nil {
		return false, err
	}
	return true, nil
}

// dropPreview unregisters preview n's route and drops its releases and
// records; the app's lock is held.
func (s *Service) dropPreview(ctx context.Context, a App, n int) error {
	ctx = context.WithoutCancel(ctx)
	s.cfg.Routes.Unregister(s.deployHost(a.Name, n))
	s.mu.Lock()
	delete(s.backends, previewKey(a.ID, n))
	s.mu.Unlock()
	rels, err := s.cfg.Store.ListPreviewReleases(ctx, a.ID, n)
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rels {
		if err := s.dropRelease(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove preview %d of app %s: %w", n, a.Name, err)
	}
	if err := s.cfg.Store.DeletePreview(ctx, a.ID, n); err != nil {
		return err
	}
	s.log.Info("preview removed", "app", a.Name, "preview", n)
	return nil
}

// previewExists reports whether app appID still has preview n (true
// when the store cannot tell).
func (s *Service) previewExists(ctx context.Context, appID string, n int) bool {
	_, err := s.cfg.Store.GetPreview(ctx, appID, n)
	return pandastack.ErrorCode(err) != pandastack.ENotFound
}

// cancelDeploys cancels app's running deploys of preview n (every deploy
// of the app and its previews for -1).
func (s *Service) cancelDeploys(ctx context.Context, appID string, n int) error {
	ds, err := s.cfg.Store.ListDeploys(ctx, appID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range ds {
		if n >= 0 && d.Preview != n {
			continue
		}
		if cancel, ok := s.running[d.ID]; ok {
			cancel()
		}
	}
	return nil
}

// startPreviews registers the route of every preview in the store,
// pointed at its live release, and drops releases a preview replaced
// that the last run did not get to drop.
func (s *Service) startPreviews(ctx context.Context, byID map[string]App) error {
	all, err := s.cfg.Store.ListPreviews(ctx, "")
	if err != nil {
		return fmt.Errorf("list previews: %w", err)
	}
	for _, p := range all {
		a, ok := byID[p.AppID]
		if !ok {
			continue
		}
		b := s.registerHost(previewKey(a.ID, p.Number), s.deployHost(a.Name, p.Number), a.Name)
		if b == nil {
			s.log.Error("preview route taken", "app", a.Name, "preview", p.Number)
			continue
		}
		rels, err := s.cfg.Store.ListPreviewReleases(ctx, a.ID, p.Number)
		if err != nil {
			return err
		}
		for _, r := range rels {
			if r.DeployID == p.LiveDeployID {
				b.set(r.MachineID, r.Port)
			} else if err := s.dropRelease(ctx, r); err != nil {
				s.log.Warn("drop replaced preview release", "release", r.ID, "err", err)
			}
		}
	}
	return nil
}

// Previews lists teamID's app's previews, by pull request number.
func (s *Service) Previews(ctx context.Context, teamID, name string) ([]Preview, error) {
	a, err := s.cfg.Store.GetApp(ctx, teamID, name)
	if err != nil {
		return nil, err
	}
	all, err := s.cfg.Store.ListPreviews(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i] = s.presentPreview(ctx, a, all[i])
	}
	return all, nil
}

// presentPreview fills in the preview's URL and its newest deploy's
// status.
func (s *Service) presentPreview(ctx context.Context, a App, p Preview) Preview {
	p.URL = "http://" + s.deployHost(a.Name, p.Number) + s.cfg.URLPort
	if p.DeployID != "" {
		if d, err := s.cfg.Store.GetDeploy(ctx, a.ID, p.DeployID); err == nil {
			p.Status = d.Status
		}
	}
	return p
}
