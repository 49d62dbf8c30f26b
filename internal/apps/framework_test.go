package apps

import (
	"maps"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/apps/detect"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// A Next.js build and app run with telemetry off unless the app's env
// says otherwise; the app's env and PORT go to every framework.
func TestAppRunEnv(t *testing.T) {
	next := detect.Plan{Framework: detect.Next, Port: 3000}
	for _, tc := range []struct {
		name string
		plan detect.Plan
		app  map[string]string
		want map[string]string
	}{
		{"next", next, nil, map[string]string{"NEXT_TELEMETRY_DISABLED": "1", "PORT": "3000"}},
		{"next, the app's env wins", next, map[string]string{"NEXT_TELEMETRY_DISABLED": "0", "A": "b"},
			map[string]string{"NEXT_TELEMETRY_DISABLED": "0", "A": "b", "PORT": "3000"}},
		{"vite", detect.Plan{Framework: detect.Vite, Port: 8080}, map[string]string{"A": "b"}, map[string]string{"A": "b", "PORT": "8080"}},
		{"the app's PORT is the plan's", detect.Plan{Framework: detect.Node, Port: 3000}, map[string]string{"PORT": "1"}, map[string]string{"PORT": "3000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := maps.Clone(tc.app)
			if got := appRunEnv(tc.plan, tc.app); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.app, before) {
				t.Errorf("the app's env changed: %v", tc.app)
			}
		})
	}
	appRunEnv(next, nil)["X"] = "y"
	if _, ok := frameworkEnv[detect.Next]["X"]; ok {
		t.Fatal("the framework's env was written through")
	}
}

// A Next.js build machine gets more memory than the base template's;
// other frameworks build at the template's size.
func TestSizeBuild(t *testing.T) {
	p := sandboxes.CreateParams{Template: "base"}
	if got := sizeBuild(p, detect.Plan{Framework: detect.Next}); got.MemoryMiB != 2048 || got.Template != "base" {
		t.Errorf("next: %+v, want 2048 MiB of template base", got)
	}
	for _, f := range []detect.Framework{detect.Vite, detect.Node, detect.Static, detect.Python, detect.Custom} {
		if got := sizeBuild(p, detect.Plan{Framework: f}); got.MemoryMiB != 0 {
			t.Errorf("%s: %d MiB, want the template's size", f, got.MemoryMiB)
		}
	}
}

// A Next.js app gets at least its start grace to become healthy, unless
// it sets its own timeout; other frameworks get the server's.
func TestHealthTimeout(t *testing.T) {
	s := &Service{cfg: Config{HealthTimeout: time.Minute}}
	next, node := detect.Plan{Framework: detect.Next}, detect.Plan{Framework: detect.Node}
	if got := s.healthTimeout(App{}, next); got != 3*time.Minute {
		t.Errorf("next: %s, want 3m", got)
	}
	if got := s.healthTimeout(App{}, node); got != time.Minute {
		t.Errorf("node: %s, want the server's 1m", got)
	}
	if got := s.healthTimeout(App{HealthTimeoutSeconds: 20}, next); got != 20*time.Second {
		t.Errorf("next with its own timeout: %s, want 20s", got)
	}
	s.cfg.HealthTimeout = 10 * time.Minute
	if got := s.healthTimeout(App{}, next); got != 10*time.Minute {
		t.Errorf("next on a server with a longer default: %s, want 10m", got)
	}
}
