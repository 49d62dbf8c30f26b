package apps

import (
	"maps"
	"strconv"
	"time"

	"github.com/pandastack/pandastack/internal/apps/detect"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// frameworkEnv is what the platform sets for a framework's builds and
// its running app, beneath the app's own env (which may override it).
// Next.js would otherwise send anonymous telemetry from every build and
// start to telemetry.nextjs.org.
var frameworkEnv = map[detect.Framework]map[string]string{
	detect.Next: {"NEXT_TELEMETRY_DISABLED": "1"},
}

// buildMemoryMiB is the memory a framework's build machine gets instead
// of the template's. `next build` (Turbopack and its page-data workers)
// of even a small app is killed by the OOM killer in the base template's
// 512 MiB (BENCHMARKS.md, Session 13), whose /tmp, a tmpfs of half the
// memory, cannot hold Next's ~440 MiB dependency archive either. The
// release, baked from the build machine, keeps its size.
var buildMemoryMiB = map[detect.Framework]int{
	detect.Next: 2048,
}

// appRunEnv is the environment of plan's build and app: the framework's,
// then the app's own, then PORT.
func appRunEnv(plan detect.Plan, appEnv map[string]string) map[string]string {
	env := maps.Clone(frameworkEnv[plan.Framework])
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, appEnv)
	env["PORT"] = strconv.Itoa(plan.Port)
	return env
}

// sizeBuild gives p, a build machine's create, the memory plan's
// framework needs (unchanged: the template's size).
func sizeBuild(p sandboxes.CreateParams, plan detect.Plan) sandboxes.CreateParams {
	if m := buildMemoryMiB[plan.Framework]; m > 0 {
		p.MemoryMiB = m
	}
	return p
}

// startGrace is the least time a framework's app gets to answer its
// first health check when the app sets no timeout of its own: `next
// start` loads Next's server, tens of MiB of JavaScript, which under TCG
// can take longer than the server's default minute.
var startGrace = map[detect.Framework]time.Duration{
	detect.Next: 3 * time.Minute,
}

// healthTimeout is how long a's release built with plan gets to become
// healthy: the app's own timeout, else the server's, at least the
// framework's startGrace.
func (s *Service) healthTimeout(a App, plan detect.Plan) time.Duration {
	if t := a.healthTimeout(); t > 0 {
		return t
	}
	return max(s.cfg.HealthTimeout, startGrace[plan.Framework])
}
