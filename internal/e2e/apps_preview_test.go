package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// pushPull commits files on branch of repository name and publishes the
// commit as pull request n's head, as GitHub does (refs/pull/N/head).
func (g *gitServer) pushPull(name, branch string, n int, files map[string]string) {
	g.push(name, branch, files)
	git(g.t, filepath.Join(g.dir, "work-"+name), "push", "--quiet", "--force", filepath.Join(g.dir, name+".git"),
		fmt.Sprintf("%s:refs/pull/%d/head", branch, n))
}

// prHook posts a signed GitHub pull_request delivery to app's webhook.
func prHook(t *testing.T, app *sdk.App, secret, delivery, action string, n int, headRef string) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"action": %q, "number": %d, "pull_request": {"number": %d, "head": {"ref": %q, "sha": "%s"}, "base": {"ref": "main"}}}`,
		action, n, n, headRef, strings.Repeat("b", 40))
	return githubHook(t, app.WebhookURL, "pull_request", secret, delivery, body)
}

// githubHook posts body to webhook path url as GitHub delivers an event:
// signed with secret (X-Hub-Signature-256), under a delivery id. It
// returns the status and the body of the answer.
func githubHook(t *testing.T, url, event, secret, delivery, body string) (int, string) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req, err := http.NewRequest("POST", main.url+url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hookDeploy is the deploy a 202 delivery answered.
func hookDeploy(t *testing.T, body string) (deploy sdk.Deploy, preview sdk.Preview) {
	t.Helper()
	var res struct {
		Deploy  *sdk.Deploy  `json:"deploy"`
		Preview *sdk.Preview `json:"preview"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || res.Deploy == nil || res.Preview == nil {
		t.Fatalf("delivery answered %s (%v), want a deploy and a preview", body, err)
	}
	return *res.Deploy, *res.Preview
}

func waitPreviewDeploy(t *testing.T, c *sdk.Client, app, id string) *sdk.Deploy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := c.WaitDeploy(ctx, app, id)
	if err != nil {
		t.Fatalf("wait for preview deploy %s: %v", id, err)
	}
	if d.Status != sdk.DeployLive {
		t.Fatalf("preview deploy: %+v\n%s", d, d.Log)
	}
	return d
}

// wantHostServes GETs / with Host HOST.apps.localhost and wants 200 with want.
func wantHostServes(t *testing.T, host, want string) {
	t.Helper()
	code, body, err := appGet(context.Background(), host, "/")
	if err != nil || code != 200 || !strings.Contains(body, want) {
		t.Fatalf("GET %s.apps.localhost/: %d %q %v; want 200 with %q", host, code, body, err, want)
	}
}

// previewMachines is the team's machines of app's preview n.
func previewMachines(t *testing.T, c *sdk.Client, app string, n int) []*sdk.Sandbox {
	t.Helper()
	sbs, err := c.ListSandboxes(context.Background(), sdk.ListParams{Metadata: map[string]string{"app": app, "preview": strconv.Itoa(n)}})
	if err != nil {
		t.Fatal(err)
	}
	return sbs
}

// Pull request previews on the shared server, from a real git daemon that
// serves refs/pull/N/head as GitHub does: a signed pull_request delivery
// (opened) deploys the pull request's head at pr-N--NAME while the app
// keeps serving its main release; a replayed delivery builds nothing; a
// bad signature is 401; synchronize redeploys the preview and drops its
// replaced release; closed removes it — 404, no machine, no snapshot, no
// record — and a replay of the old opened delivery does not bring it
// back; deleting the app removes a preview it still has. Another team
// sees none of it.
func TestAppPreviews(t *testing.T) {
	ctx := context.Background()
	gs := startGitDaemon(t)
	c := teamClient(t, "team-previews")
	other := teamClient(t, "team-previews-other")
	url := gs.push("pv", "main", map[string]string{"index.html": "<h1>main v1</h1>\n"})
	app, err := c.CreateApp(ctx, sdk.CreateAppParams{Name: "pv", GitURL: url, HealthTimeoutSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteApp(context.Background(), "pv") })
	live := deployAndWait(t, c, "pv", "")
	if live.Status != sdk.DeployLive {
		t.Fatalf("main deploy: %+v\n%s", live, live.Log)
	}
	wantHostServes(t, "pv", "main v1")

	gs.pushPull("pv", "feature", 7, map[string]string{"index.html": "<h1>pr v1</h1>\n"})
	if code, body := prHook(t, app, "whsec_wrong", "pr-0", "opened", 7, "feature"); code != http.StatusUnauthorized {
		t.Fatalf("bad signature: %d %s, want 401", code, body)
	}
	code, body := prHook(t, app, app.WebhookSecret, "pr-1", "opened", 7, "feature")
	if code != http.StatusAccepted {
		t.Fatalf("opened: %d %s, want 202", code, body)
	}
	d1, p := hookDeploy(t, body)
	if d1.Preview != 7 || d1.Ref != "refs/pull/7/head" || !strings.HasPrefix(p.URL, "http://pr-7--pv.apps.localhost:") {
		t.Fatalf("opened queued %+v for preview %+v", d1, p)
	}
	// A replay, even while the first delivery's deploy runs, builds nothing.
	before, _ := c.ListDeploys(ctx, "pv")
	if code, body := prHook(t, app, app.WebhookSecret, "pr-1", "opened", 7, "feature"); code != http.StatusOK || !strings.Contains(body, "already received") {
		t.Fatalf("replayed delivery: %d %s, want 200 ignored", code, body)
	}
	if after, _ := c.ListDeploys(ctx, "pv"); len(after) != len(before) {
		t.Fatalf("a replay queued a deploy: %d deploys before, %d after", len(before), len(after))
	}
	waitPreviewDeploy(t, c, "pv", d1.ID)
	wantHostServes(t, "pr-7--pv", "pr v1")
	wantHostServes(t, "pv", "main v1")
	if a, err := c.GetApp(ctx, "pv"); err != nil || a.LiveDeployID != live.ID {
		t.Fatalf("the app after its preview went live: %+v %v, want live deploy %s", a, err, live.ID)
	}
	ps, err := c.ListPreviews(ctx, "pv")
	if err != nil || len(ps) != 1 || ps[0].Number != 7 || ps[0].LiveDeployID != d1.ID || ps[0].Status != sdk.DeployLive || ps[0].HeadRef != "feature" {
		t.Fatalf("previews: %+v %v", ps, err)
	}
	if _, err := other.ListPreviews(ctx, "pv"); errCode(err) != "not_found" {
		t.Fatalf("another team's list of previews: %v, want not_found", err)
	}
	firstSnap := appSnapshots(t, c, "pv")["app-pv-"+d1.ID]
	if firstSnap == nil {
		t.Fatalf("no snapshot of the preview's release among %v", snapNames(appSnapshots(t, c, "pv")))
	}

	gs.pushPull("pv", "feature", 7, map[string]string{"index.html": "<h1>pr v2</h1>\n"})
	code, body = prHook(t, app, app.WebhookSecret, "pr-2", "synchronize", 7, "feature")
	if code != http.StatusAccepted {
		t.Fatalf("synchronize: %d %s, want 202", code, body)
	}
	d2, _ := hookDeploy(t, body)
	waitPreviewDeploy(t, c, "pv", d2.ID)
	wantHostServes(t, "pr-7--pv", "pr v2")
	wantHostServes(t, "pv", "main v1")
	if d, err := c.GetDeploy(ctx, "pv", d1.ID); err != nil || d.Status != sdk.DeploySuperseded {
		t.Fatalf("the preview's first deploy after the second: %+v %v, want superseded", d, err)
	}
	// The replaced release drains, then goes with its snapshot.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		_, snapLeft := appSnapshots(t, c, "pv")["app-pv-"+d1.ID]
		if n := len(previewMachines(t, c, "pv", 7)); n == 1 && !snapLeft {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after the redeploy: %d machines of preview 7 (want 1), the first release's snapshot left: %v", n, snapLeft)
		}
	}
	secondSnap := appSnapshots(t, c, "pv")["app-pv-"+d2.ID]
	if secondSnap == nil {
		t.Fatal("no snapshot of the preview's second release")
	}

	code, body = prHook(t, app, app.WebhookSecret, "pr-3", "closed", 7, "feature")
	if code != http.StatusOK || !strings.Contains(body, `"removed":true`) {
		t.Fatalf("closed: %d %s, want 200 removed", code, body)
	}
	if code, body, err := appGet(ctx, "pr-7--pv", "/"); err != nil || code != http.StatusNotFound {
		t.Fatalf("the closed preview: %d %q %v, want 404", code, body, err)
	}
	wantHostServes(t, "pv", "main v1")
	if sbs := previewMachines(t, c, "pv", 7); len(sbs) != 0 {
		t.Fatalf("machines of the closed preview are left: %+v", sbs[0])
	}
	snaps := appSnapshots(t, c, "pv")
	for _, id := range []string{d1.ID, d2.ID} {
		if snaps["app-pv-"+id] != nil {
			t.Fatalf("snapshot of preview deploy %s is left", id)
		}
	}
	if _, err := os.Stat(filepath.Join(main.dataDir, "cow", "snapshots", secondSnap.ID)); !os.IsNotExist(err) {
		t.Fatalf("the closed preview's snapshot %s is still on disk: %v", secondSnap.ID, err)
	}
	if _, err := c.GetDeploy(ctx, "pv", d2.ID); errCode(err) != "not_found" {
		t.Fatalf("the closed preview's deploy: %v, want not_found", err)
	}
	if ps, err := c.ListPreviews(ctx, "pv"); err != nil || len(ps) != 0 {
		t.Fatalf("previews after close: %+v %v", ps, err)
	}
	if code, body := prHook(t, app, app.WebhookSecret, "pr-1", "opened", 7, "feature"); code != http.StatusOK || !strings.Contains(body, "already received") {
		t.Fatalf("the opened delivery replayed after close: %d %s, want 200 ignored", code, body)
	}
	if ps, _ := c.ListPreviews(ctx, "pv"); len(ps) != 0 {
		t.Fatalf("a replay reopened the preview: %+v", ps)
	}

	// A preview the app still has goes with it.
	gs.pushPull("pv", "feature", 8, map[string]string{"index.html": "<h1>pr 8</h1>\n"})
	code, body = prHook(t, app, app.WebhookSecret, "pr-4", "opened", 8, "feature")
	if code != http.StatusAccepted {
		t.Fatalf("opened 8: %d %s, want 202", code, body)
	}
	d8, _ := hookDeploy(t, body)
	waitPreviewDeploy(t, c, "pv", d8.ID)
	wantHostServes(t, "pr-8--pv", "pr 8")
	if err := c.DeleteApp(ctx, "pv"); err != nil {
		t.Fatal(err)
	}
	if code, _, err := appGet(ctx, "pr-8--pv", "/"); err != nil || code != http.StatusNotFound {
		t.Fatalf("the deleted app's preview: %d %v, want 404", code, err)
	}
	if sbs := previewMachines(t, c, "pv", 8); len(sbs) != 0 {
		t.Fatalf("machines of the deleted app's preview are left: %+v", sbs[0])
	}
	if snaps := appSnapshots(t, c, "pv"); len(snaps) != 0 {
		t.Fatalf("snapshots of the deleted app are left: %v", snapNames(snaps))
	}
}
