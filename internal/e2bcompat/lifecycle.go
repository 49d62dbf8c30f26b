package e2bcompat

import (
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// E2B's sandbox lifecycle, onto the engine's: lifecycle.onTimeout 'pause'
// (autoPause on the wire) is on_expiry hibernate — the sandbox is
// hibernated, not ended, when its timeout runs out, and keeps its files
// and memory until Sandbox.connect resumes it (or it is killed).
// lifecycle.autoResume ({"enabled":true}) lets traffic to a paused sandbox
// — envd calls, its PORT-ID host — wake it; without it a paused sandbox's
// data plane answers 502 until it is resumed, as on E2B. A PandaStack
// pause keeps memory always: autoPauseMemory false (E2B's
// filesystem-only snapshot) is served as a full one, which keeps more.

// reservedPrefix starts the metadata keys this package keeps on a
// sandbox; E2B users may not set them and never see them.
const reservedPrefix = "pandastack.e2b."

// autoResumeKey marks a sandbox created through the E2B API: "true" when
// traffic wakes it while it is paused, "false" when it must be resumed by
// connect. Sandboxes created through PandaStack's own API (no key) wake
// on any use, as they do there.
const autoResumeKey = reservedPrefix + "auto_resume"

type autoResumeConfig struct {
	Enabled bool `json:"enabled"`
}

// lifecycleJSON is E2B's SandboxLifecycle in sandbox info.
type lifecycleJSON struct {
	OnTimeout  string `json:"onTimeout"`
	AutoResume bool   `json:"autoResume"`
}

// createLifecycle checks a create's autoPause and autoResume and returns
// the engine's on_expiry and the value of autoResumeKey.
func createLifecycle(autoPause bool, autoResume *autoResumeConfig) (onExpiry, resume string, err error) {
	resume = "false"
	if autoResume != nil && autoResume.Enabled {
		if !autoPause {
			return "", "", pandastack.Errorf(pandastack.EInvalid, "autoResume can be enabled only when lifecycle onTimeout is 'pause' (autoPause)")
		}
		resume = "true"
	}
	if autoPause {
		onExpiry = string(pandastack.OnExpiryHibernate)
	}
	return onExpiry, resume, nil
}

// lifecycleOf is sb's lifecycle as E2B's info shows it.
func lifecycleOf(sb pandastack.Sandbox) *lifecycleJSON {
	l := &lifecycleJSON{OnTimeout: "kill", AutoResume: sb.Metadata[autoResumeKey] != "false"}
	if sb.OnExpiry.Hibernates() {
		l.OnTimeout = "pause"
	} else {
		l.AutoResume = false
	}
	return l
}

// pausedShut reports whether sb is paused and only a connect may resume it.
func pausedShut(sb pandastack.Sandbox) bool {
	return sb.State == pandastack.StateHibernated && sb.Metadata[autoResumeKey] == "false"
}

// endAt is E2B's endAt for sb: when its timeout runs out, or, for one
// paused at its timeout (no deadline while it sleeps), now.
func endAt(sb pandastack.Sandbox) time.Time {
	if sb.ExpiresAt.IsZero() {
		return time.Now().UTC().Truncate(time.Second)
	}
	return sb.ExpiresAt
}

func reservedMetadata(k string) bool { return strings.HasPrefix(k, reservedPrefix) }
