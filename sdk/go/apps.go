package pandastack

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"time"
)

// App is a git repository served at NAME.apps.DOMAIN.
type App struct {
	ID                   string    `json:"id"`
	TeamID               string    `json:"team_id"`
	Name                 string    `json:"name"`
	GitURL               string    `json:"git_url"`
	Branch               string    `json:"branch"`
	EnvKeys              []string  `json:"env_keys"`
	BuildCommand         string    `json:"build_command,omitempty"`
	StartCommand         string    `json:"start_command,omitempty"`
	Port                 int       `json:"port,omitempty"`
	HealthPath           string    `json:"health_path"`
	HealthTimeoutSeconds int       `json:"health_timeout_seconds"`
	AutoHibernateSeconds int       `json:"auto_hibernate_seconds"`
	LiveDeployID         string    `json:"live_deploy_id"`
	URL                  string    `json:"url"`
	WebhookURL           string    `json:"webhook_url"`
	GitRemote            string    `json:"git_remote"`               // path of the app's git remote under the base URL: a push there deploys (the API key as the password)
	WebhookSecret        string    `json:"webhook_secret,omitempty"` // in CreateApp's answer only
	CreatedAt            time.Time `json:"created_at"`
}

// CreateAppParams creates an app. Name is required; GitURL is the
// repository deploys clone (leave it empty for an app deployed by pushing
// to its git remote); the rest overrides what detection finds.
type CreateAppParams struct {
	Name                 string            `json:"name"`
	GitURL               string            `json:"git_url,omitempty"`
	Branch               string            `json:"branch,omitempty"`
	Env                  map[string]string `json:"env,omitempty"`
	BuildCommand         string            `json:"build_command,omitempty"`
	StartCommand         string            `json:"start_command,omitempty"`
	Port                 int               `json:"port,omitempty"`
	HealthPath           string            `json:"health_path,omitempty"`
	HealthTimeoutSeconds int               `json:"health_timeout_seconds,omitempty"`
	AutoHibernateSeconds int               `json:"auto_hibernate_seconds,omitempty"`
}

// Deploy statuses.
const (
	DeployQueued     = "queued"
	DeployBuilding   = "building"
	DeployDeploying  = "deploying"
	DeployLive       = "live"
	DeployFailed     = "failed"
	DeploySuperseded = "superseded"
)

// Deploy is one build of an app and, when it went live, its release.
type Deploy struct {
	ID         string    `json:"id"`
	AppID      string    `json:"app_id"`
	Status     string    `json:"status"`
	Ref        string    `json:"ref"`
	Commit     string    `json:"commit,omitempty"`
	Framework  string    `json:"framework,omitempty"`
	Error      string    `json:"error,omitempty"`
	DeliveryID string    `json:"delivery_id,omitempty"`
	Preview    int       `json:"preview,omitempty"` // the pull request a preview deploy builds (0: the app itself)
	Log        string    `json:"log,omitempty"`     // GetDeploy only
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Done reports whether the deploy finished (live, failed or superseded).
func (d *Deploy) Done() bool {
	return d.Status == DeployLive || d.Status == DeployFailed || d.Status == DeploySuperseded
}

func appPath(name string) string { return "/v1/apps/" + url.PathEscape(name) }

// CreateApp records an app; a name the team (or server) has is "conflict".
func (c *Client) CreateApp(ctx context.Context, p CreateAppParams) (*App, error) {
	a := &App{}
	if err := c.do(ctx, request{method: "POST", path: "/v1/apps", body: p}, a); err != nil {
		return nil, err
	}
	return a, nil
}

// GetApp fetches one of the team's apps.
func (c *Client) GetApp(ctx context.Context, name string) (*App, error) {
	a := &App{}
	if err := c.do(ctx, request{method: "GET", path: appPath(name)}, a); err != nil {
		return nil, err
	}
	return a, nil
}

// ListApps lists the team's apps.
func (c *Client) ListApps(ctx context.Context) ([]App, error) {
	var out struct {
		Apps []App `json:"apps"`
	}
	err := c.do(ctx, request{method: "GET", path: "/v1/apps"}, &out)
	return out.Apps, err
}

// DeleteApp deletes an app with its route, machines and snapshots.
func (c *Client) DeleteApp(ctx context.Context, name string) error {
	return c.do(ctx, request{method: "DELETE", path: appPath(name)}, nil)
}

// DeployApp queues a deploy of the app's branch (or ref, when not "").
func (c *Client) DeployApp(ctx context.Context, name, ref string) (*Deploy, error) {
	d := &Deploy{}
	body := struct {
		Ref string `json:"ref,omitempty"`
	}{ref}
	if err := c.do(ctx, request{method: "POST", path: appPath(name) + "/deploys", body: body}, d); err != nil {
		return nil, err
	}
	return d, nil
}

// GetDeploy fetches a deploy with its log so far.
func (c *Client) GetDeploy(ctx context.Context, name, id string) (*Deploy, error) {
	d := &Deploy{}
	if err := c.do(ctx, request{method: "GET", path: appPath(name) + "/deploys/" + url.PathEscape(id)}, d); err != nil {
		return nil, err
	}
	return d, nil
}

// ListDeploys lists an app's deploys, newest first.
func (c *Client) ListDeploys(ctx context.Context, name string) ([]Deploy, error) {
	var out struct {
		Deploys []Deploy `json:"deploys"`
	}
	err := c.do(ctx, request{method: "GET", path: appPath(name) + "/deploys"}, &out)
	return out.Deploys, err
}

// DeployLogs returns a deploy's log as plain text.
func (c *Client) DeployLogs(ctx context.Context, name, id string) (string, error) {
	resp, err := c.send(ctx, request{method: "GET", path: appPath(name) + "/deploys/" + url.PathEscape(id) + "/logs", accept: "text/plain"})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// WaitDeploy polls a deploy until it is done (live, failed or
// superseded) or ctx ends.
func (c *Client) WaitDeploy(ctx context.Context, name, id string) (*Deploy, error) {
	for {
		d, err := c.GetDeploy(ctx, name, id)
		if err != nil {
			return nil, err
		}
		if d.Done() {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("pandastack: deploy %s still %s: %w", id, d.Status, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// RollbackApp serves a previous release again: deployID's, or the newest
// one not live when "".
func (c *Client) RollbackApp(ctx context.Context, name, deployID string) (*Deploy, error) {
	d := &Deploy{}
	body := struct {
		DeployID string `json:"deploy_id,omitempty"`
	}{deployID}
	if err := c.do(ctx, request{method: "POST", path: appPath(name) + "/rollback", body: body}, d); err != nil {
		return nil, err
	}
	return d, nil
}

// Preview is a pull request's preview of an app, served at URL
// (pr-N--NAME.apps.DOMAIN) until the pull request closes. GitHub's
// pull_request webhook opens, updates and removes it.
type Preview struct {
	AppID        string    `json:"app_id"`
	Number       int       `json:"number"`
	HeadRef      string    `json:"head_ref"`
	HeadSHA      string    `json:"head_sha"`
	DeployID     string    `json:"deploy_id"`      // the newest deploy
	LiveDeployID string    `json:"live_deploy_id"` // the deploy serving it ("" before one went live)
	Status       string    `json:"status,omitempty"`
	URL          string    `json:"url"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// ListPreviews lists an app's pull request previews, by number.
func (c *Client) ListPreviews(ctx context.Context, name string) ([]Preview, error) {
	var out struct {
		Previews []Preview `json:"previews"`
	}
	err := c.do(ctx, request{method: "GET", path: appPath(name) + "/previews"}, &out)
	return out.Previews, err
}
