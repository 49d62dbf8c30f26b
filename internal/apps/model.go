package apps

import (
	"context"
	"time"
)

// Deploy statuses.
const (
	StatusQueued     = "queued"
	StatusBuilding   = "building"
	StatusDeploying  = "deploying"
	StatusLive       = "live"
	StatusFailed     = "failed"
	StatusSuperseded = "superseded"
)

// App is a git repository served at NAME.apps.DOMAIN.
type App struct {
	ID     string `json:"id"`
	TeamID string `json:"team_id"`
	Name   string `json:"name"`
	// GitURL is the repository deploys clone; "" for an app deployed
	// only by pushing to its git remote.
	GitURL string `json:"git_url"`
	Branch string `json:"branch"`
	// Env is given to builds and the running app; values are sealed at
	// rest and never listed (EnvKeys lists the names).
	Env                  map[string]string `json:"-"`
	EnvKeys              []string          `json:"env_keys"`
	BuildCommand         string            `json:"build_command,omitempty"`
	StartCommand         string            `json:"start_command,omitempty"`
	Port                 int               `json:"port,omitempty"`
	HealthPath           string            `json:"health_path"`
	HealthTimeoutSeconds int               `json:"health_timeout_seconds"`
	AutoHibernateSeconds int               `json:"auto_hibernate_seconds"`
	// LiveDeployID is the deploy whose release takes the app's traffic
	// ("" before the first one goes live).
	LiveDeployID string `json:"live_deploy_id"`
	// URL and WebhookURL are where the app is served and where GitHub
	// posts pushes (filled in by the service).
	URL        string `json:"url"`
	WebhookURL string `json:"webhook_url"`
	// GitRemote is the path, under the API's base URL, of the app's own
	// git remote: a push to the app's branch there deploys it.
	GitRemote string `json:"git_remote"`
	// WebhookSecret signs GitHub's pushes; shown when the app is created
	// only.
	WebhookSecret string    `json:"webhook_secret,omitempty"`
	CreatedAt     time.Time `json:"created_at"`

	// source, when set, is what a deploy clones instead of GitURL (the
	// app's git remote, for a push).
	source string

	// EnvSealed and SecretSealed are what the store keeps.
	EnvSealed    string `json:"-"`
	SecretSealed string `json:"-"`
}

// healthTimeout is the app's own health check timeout (0: the server's).
func (a App) healthTimeout() time.Duration {
	return time.Duration(a.HealthTimeoutSeconds) * time.Second
}

// Deploy is one build of an app and, when it went live, its release.
type Deploy struct {
	ID     string `json:"id"`
	AppID  string `json:"app_id"`
	Status string `json:"status"`
	// Ref is the branch or tag built (the app's branch unless the deploy
	// named one); Commit the commit it resolved to.
	Ref       string `json:"ref"`
	Commit    string `json:"commit,omitempty"`
	Framework string `json:"framework,omitempty"`
	// Error says why a failed deploy failed.
	Error string `json:"error,omitempty"`
	// DeliveryID is the GitHub delivery that asked for it ("" otherwise).
	DeliveryID string `json:"delivery_id,omitempty"`
	// Preview is the pull request number a preview deploy builds (0: a
	// deploy of the app itself).
	Preview   int       `json:"preview,omitempty"`
	Log       string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Release is a deploy that passed its health check: the snapshot of its
// running app and the service machine restored from it.
type Release struct {
	ID         string `json:"id"`
	AppID      string `json:"app_id"`
	DeployID   string `json:"deploy_id"`
	SnapshotID string `json:"snapshot_id"`
	MachineID  string `json:"machine_id"`
	Port       int    `json:"port"`
	// Preview is the pull request number of a preview's release (0: one
	// of the app's own).
	Preview   int       `json:"preview,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// Store keeps apps, deploys and releases (internal/store/sqlite).
type Store interface {
	// CreateApp records a new app: EConflict when the team has one of
	// that name.
	CreateApp(ctx context.Context, a App) error
	// GetApp finds a team's app by name (ENotFound); GetAppByID by id.
	GetApp(ctx context.Context, teamID, name string) (App, error)
	GetAppByID(ctx context.Context, id string) (App, error)
	// ListApps lists a team's apps (every team's for ""), oldest first.
	ListApps(ctx context.Context, teamID string) ([]App, error)
	// SetLiveDeploy points an app at its live deploy.
	SetLiveDeploy(ctx context.Context, appID, deployID string) error
	// DeleteApp removes an app with its deploys and releases.
	DeleteApp(ctx context.Context, id string) error

	// PutDeploy writes a deploy (insert or replace); a delivery id the
	// app already has is EConflict.
	PutDeploy(ctx context.Context, d Deploy) error
	// GetDeploy finds an app's deploy (ENotFound), with its log.
	GetDeploy(ctx context.Context, appID, id string) (Deploy, error)
	// ListDeploys lists an app's deploys, newest first, without logs.
	ListDeploys(ctx context.Context, appID string) ([]Deploy, error)

	PutRelease(ctx context.Context, r Release) error
	// ListReleases lists an app's own releases (not its previews'),
	// newest first.
	ListReleases(ctx context.Context, appID string) ([]Release, error)
	DeleteRelease(ctx context.Context, id string) error

	// PutPreview writes a preview (insert or replace).
	PutPreview(ctx context.Context, p Preview) error
	// GetPreview finds an app's preview by number (ENotFound).
	GetPreview(ctx context.Context, appID string, number int) (Preview, error)
	// ListPreviews lists an app's previews (every app's for ""), by number.
	ListPreviews(ctx context.Context, appID string) ([]Preview, error)
	// ListPreviewReleases lists the releases of an app's preview number
	// (every preview's for 0), newest first.
	ListPreviewReleases(ctx context.Context, appID string, number int) ([]Release, error)
	// RecordDelivery remembers a webhook delivery of the app's:
	// EConflict when it was recorded before.
	RecordDelivery(ctx context.Context, appID, delivery string) error
	// DeletePreview forgets a preview with its deploys and release
	// records (the caller dropped the machines and snapshots).
	DeletePreview(ctx context.Context, appID string, number int) error
}

// Preview is a pull request's build of an app, served at
// pr-N--NAME.apps.DOMAIN until the pull request closes. It never touches
// the app's live release or route.
type Preview struct {
	AppID  string `json:"app_id"`
	Number int    `json:"number"`
	// HeadRef and HeadSHA are the pull request's head branch and commit
	// as the last delivery named them.
	HeadRef string `json:"head_ref"`
	HeadSHA string `json:"head_sha"`
	// DeployID is the preview's newest deploy; LiveDeployID the one
	// whose release serves it ("" before one went live).
	DeployID     string `json:"deploy_id"`
	LiveDeployID string `json:"live_deploy_id"`
	// Status is the newest deploy's status; URL where the preview is
	// served (filled in by the service).
	Status    string    `json:"status,omitempty"`
	URL       string    `json:"url"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// sourceName is what a deploy's log calls the repository it clones.
func (a App) sourceName() string {
	if a.source != "" || a.GitURL == "" {
		return "the app's git remote " + GitRemotePath(a.Name)
	}
	return a.GitURL
}
