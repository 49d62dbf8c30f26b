package apps

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/pandastack/pandastack"
)

// HookResult says what a webhook delivery did.
type HookResult struct {
	// Deploy is the deploy it queued (nil: none).
	Deploy *Deploy `json:"deploy,omitempty"`
	// Ignored says why it queued none.
	Ignored string `json:"ignored,omitempty"`
	// Preview is the preview a pull_request delivery opened or updated.
	Preview *Preview `json:"preview,omitempty"`
	// Removed: a closed pull request's preview was removed.
	Removed bool `json:"removed,omitempty"`
}

// pushEvent is what a push delivery carries that matters here.
type pushEvent struct {
	Ref     string `json:"ref"`
	After   string `json:"after"`
	Deleted bool   `json:"deleted"`
}

// GitHubHook handles a GitHub webhook delivery for app appID: the
// X-Hub-Signature-256 HMAC of the raw body with the app's secret must
// match (else EUnauthorized, the same for an unknown app); a push to the
// app's branch queues a deploy once per delivery id (a replay queues
// nothing); a pull_request opens, updates or removes the pull request's
// preview (pullRequest); pings, other events, other branches, tags and branch
// deletions are ignored.
func (s *Service) GitHubHook(ctx context.Context, appID, event, delivery, signature string, body []byte) (HookResult, error) {
	unauthorized := pandastack.Errorf(pandastack.EUnauthorized, "the X-Hub-Signature-256 header does not match the body signed with the app's webhook secret")
	a, err := s.cfg.Store.GetAppByID(ctx, appID)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.ENotFound {
			return HookResult{}, unauthorized
		}
		return HookResult{}, err
	}
	secret, err := s.cfg.Secrets.Open(a.SecretSealed, "app-webhook:"+a.ID)
	if err != nil {
		return HookResult{}, err
	}
	sig, ok := strings.CutPrefix(signature, "sha256=")
	got, derr := hex.DecodeString(sig)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !ok || derr != nil || !hmac.Equal(got, mac.Sum(nil)) {
		return HookResult{}, unauthorized
	}
	switch event {
	case "ping":
		return HookResult{Ignored: "ping"}, nil
	case "push", "pull_request":
	default:
		return HookResult{Ignored: "event " + event + " is not handled"}, nil
	}
	if delivery == "" || len(delivery) > 100 {
		return HookResult{}, pandastack.Errorf(pandastack.EInvalid, "X-GitHub-Delivery is required (at most 100 characters)")
	}
	if event == "pull_request" {
		return s.pullRequest(ctx, a, delivery, body)
	}
	var push pushEvent
	if err := json.Unmarshal(body, &push); err != nil {
		return HookResult{}, pandastack.Errorf(pandastack.EInvalid, "the push payload is not JSON: %v", err)
	}
	branch, isBranch := strings.CutPrefix(push.Ref, "refs/heads/")
	switch {
	case !isBranch:
		return HookResult{Ignored: "ref " + push.Ref + " is not a branch"}, nil
	case branch != a.Branch:
		return HookResult{Ignored: "branch " + branch + " is not the app's (" + a.Branch + ")"}, nil
	case push.Deleted || strings.Trim(push.After, "0") == "":
		return HookResult{Ignored: "branch " + branch + " was deleted"}, nil
	}
	d, err := s.startDeploy(ctx, a, branch, delivery)
	if pandastack.ErrorCode(err) == pandastack.EConflict {
		return HookResult{Ignored: "delivery " + delivery + " was already received"}, nil
	}
	if err != nil {
		return HookResult{}, err
	}
	return HookResult{Deploy: &d}, nil
}
