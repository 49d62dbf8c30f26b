package api

import (
	"context"
	"io"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/apps"
)

// maxHookBody bounds a webhook delivery (GitHub's push payloads are
// capped at 25 MB; a push's first 5 MiB is plenty for what is read).
const maxHookBody = 5 << 20

// Apps is git-driven app hosting (*apps.Service).
type Apps interface {
	Create(ctx context.Context, teamID string, p apps.CreateParams) (apps.App, error)
	Get(ctx context.Context, teamID, name string) (apps.App, error)
	List(ctx context.Context, teamID string) ([]apps.App, error)
	Delete(ctx context.Context, teamID, name string) error
	Deploy(ctx context.Context, teamID, name, ref string) (apps.Deploy, error)
	GetDeploy(ctx context.Context, teamID, name, id string) (apps.Deploy, error)
	ListDeploys(ctx context.Context, teamID, name string) ([]apps.Deploy, error)
	Rollback(ctx context.Context, teamID, name, deployID string) (apps.Deploy, error)
	GitHubHook(ctx context.Context, appID, event, delivery, signature string, body []byte) (apps.HookResult, error)
	// Previews lists the app's pull request previews.
	Previews(ctx context.Context, teamID, name string) ([]apps.Preview, error)
	// ServeGit serves the app's git remote (smart HTTP) to teamID.
	ServeGit(w http.ResponseWriter, r *http.Request, teamID, name, service string) error
}

// deployWithLog is a deploy as GET shows it: with its log so far.
type deployWithLog struct {
	apps.Deploy
	Log string `json:"log"`
}

func (s *Server) apps() (Apps, error) {
	if s.cfg.Apps == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "app hosting is not enabled on this server")
	}
	return s.cfg.Apps, nil
}

func (s *Server) createApp(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	var p apps.CreateParams
	if err := decodeJSON(w, r, &p); err != nil {
		return err
	}
	p.AllowLocal = caller(r).key.Admin
	a, err := svc.Create(r.Context(), caller(r).team.ID, p)
	if err != nil {
		return wrap(err, "create app")
	}
	writeJSON(w, http.StatusCreated, a)
	return nil
}

func (s *Server) listApps(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	all, err := svc.List(r.Context(), caller(r).team.ID)
	if err != nil {
		return wrap(err, "list apps")
	}
	writeJSON(w, http.StatusOK, map[string]any{"apps": all})
	return nil
}

func (s *Server) getApp(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	a, err := svc.Get(r.Context(), caller(r).team.ID, r.PathValue("name"))
	if err != nil {
		return wrap(err, "get app")
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) deleteApp(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	if err := svc.Delete(r.Context(), caller(r).team.ID, r.PathValue("name")); err != nil {
		return wrap(err, "delete app")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) createDeploy(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	var req struct {
		Ref string `json:"ref"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	d, err := svc.Deploy(r.Context(), caller(r).team.ID, r.PathValue("name"), req.Ref)
	if err != nil {
		return wrap(err, "deploy app")
	}
	writeJSON(w, http.StatusAccepted, d)
	return nil
}

func (s *Server) listDeploys(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	ds, err := svc.ListDeploys(r.Context(), caller(r).team.ID, r.PathValue("name"))
	if err != nil {
		return wrap(err, "list deploys")
	}
	writeJSON(w, http.StatusOK, map[string]any{"deploys": ds})
	return nil
}

func (s *Server) getDeploy(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	d, err := svc.GetDeploy(r.Context(), caller(r).team.ID, r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		return wrap(err, "get deploy")
	}
	writeJSON(w, http.StatusOK, deployWithLog{Deploy: d, Log: d.Log})
	return nil
}

func (s *Server) deployLogs(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	d, err := svc.GetDeploy(r.Context(), caller(r).team.ID, r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		return wrap(err, "get deploy")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, d.Log)
	return nil
}

func (s *Server) rollbackApp(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	var req struct {
		DeployID string `json:"deploy_id"`
	}
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	d, err := svc.Rollback(r.Context(), caller(r).team.ID, r.PathValue("name"), req.DeployID)
	if err != nil {
		return wrap(err, "roll back app")
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// githubHook takes a GitHub webhook delivery; the app's webhook secret
// authenticates it, not an API key.
func (s *Server) githubHook(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHookBody))
	if err != nil {
		return pandastack.Errorf(pandastack.EInvalid, "read delivery: %v", err)
	}
	res, err := svc.GitHubHook(r.Context(), r.PathValue("id"), r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery"),
		r.Header.Get("X-Hub-Signature-256"), body)
	if err != nil {
		return wrap(err, "webhook")
	}
	status := http.StatusOK
	if res.Deploy != nil {
		status = http.StatusAccepted
	}
	writeJSON(w, status, res)
	return nil
}
