package api

import (
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/pandastack/pandastack"
)

// access says who may call a route.
type access int

const (
	public access = iota // no key needed
	team                 // any valid key; sees its own team only
	admin                // admin keys only
)

func (a access) String() string {
	switch a {
	case public:
		return "public"
	case admin:
		return "admin"
	}
	return "team"
}

// handlerFunc serves one route. A returned error is written as a JSON error
// unless the response has already started (then it is only logged).
type handlerFunc func(s *Server, w http.ResponseWriter, r *http.Request) error

type route struct {
	method string
	path   string // net/http pattern path; OpenAPI uses the same {name} syntax
	access access
	handle handlerFunc
}

// routeTable is every route the server serves: the single list from which
// the mux is built and against which the OpenAPI spec is checked.
var routeTable = []route{
	{"GET", "/v1/health", public, (*Server).health},
	{"GET", "/v1/ca.pem", public, (*Server).caCert},

	{"POST", "/v1/sandboxes", team, (*Server).createSandbox},
	{"GET", "/v1/sandboxes", team, (*Server).listSandboxes},
	{"GET", "/v1/sandboxes/{id}", team, (*Server).getSandbox},
	{"DELETE", "/v1/sandboxes/{id}", team, (*Server).killSandbox},
	{"PUT", "/v1/sandboxes/{id}/ttl", team, (*Server).setTTL},
	{"POST", "/v1/sandboxes/{id}/hibernate", team, (*Server).hibernate},
	{"POST", "/v1/sandboxes/{id}/wake", team, (*Server).wake},
	{"POST", "/v1/sandboxes/{id}/fork", team, (*Server).fork},
	{"POST", "/v1/sandboxes/{id}/snapshot", team, (*Server).snapshot},
	{"GET", "/v1/sandboxes/{id}/network", team, (*Server).getNetwork},
	{"PUT", "/v1/sandboxes/{id}/network", team, (*Server).setNetwork},
	{"POST", "/v1/sandboxes/{id}/ports/{port}/url", team, (*Server).portURL},
	{"GET", "/v1/machines", team, (*Server).listMachines},
	{"GET", "/v1/snapshots", team, (*Server).listSnapshots},
	{"GET", "/v1/snapshots/{id}", team, (*Server).getSnapshot},
	{"DELETE", "/v1/snapshots/{id}", team, (*Server).deleteSnapshot},
	{"POST", "/v1/snapshots", team, (*Server).importSnapshot},
	{"POST", "/v1/snapshots/{id}/export", team, (*Server).exportSnapshot},
	{"POST", "/v1/volumes", team, (*Server).createVolume},
	{"GET", "/v1/volumes", team, (*Server).listVolumes},
	{"GET", "/v1/volumes/{id}", team, (*Server).getVolume},
	{"DELETE", "/v1/volumes/{id}", team, (*Server).deleteVolume},
	{"POST", "/v1/databases", team, (*Server).createDatabase},
	{"GET", "/v1/databases", team, (*Server).listDatabases},
	{"GET", "/v1/databases/{id}", team, (*Server).getDatabase},
	{"DELETE", "/v1/databases/{id}", team, (*Server).deleteDatabase},
	{"POST", "/v1/databases/{id}/hibernate", team, (*Server).hibernateDatabase},
	{"POST", "/v1/databases/{id}/wake", team, (*Server).wakeDatabase},
	{"POST", "/v1/databases/{id}/fork", team, (*Server).forkDatabase},
	{"GET", "/v1/databases/{id}/backups", team, (*Server).listDatabaseBackups},
	{"POST", "/v1/databases/{id}/backups", team, (*Server).backupDatabase},
	{"POST", "/v1/databases/{id}/restore", team, (*Server).restoreDatabase},
	{"POST", "/sql", public, (*Server).sqlOverHTTP},
	{"OPTIONS", "/sql", public, (*Server).sqlOverHTTP},

	{"POST", "/v1/sandboxes/{id}/exec", team, (*Server).exec},
	{"POST", "/v1/sandboxes/{id}/ping", team, (*Server).ping},
	{"POST", "/v1/sandboxes/{id}/code", team, (*Server).runCode},
	{"GET", "/v1/sandboxes/{id}/code/contexts", team, (*Server).codeContexts},
	{"GET", "/v1/sandboxes/{id}/processes", team, (*Server).processes},
	{"GET", "/v1/sandboxes/{id}/processes/{pid}/stream", team, (*Server).attach},
	{"POST", "/v1/sandboxes/{id}/processes/{pid}/signal", team, (*Server).signal},
	{"GET", "/v1/sandboxes/{id}/pty", team, (*Server).terminal},

	{"GET", "/v1/sandboxes/{id}/files", team, (*Server).readFile},
	{"PUT", "/v1/sandboxes/{id}/files", team, (*Server).writeFile},
	{"DELETE", "/v1/sandboxes/{id}/files", team, (*Server).removeFile},
	{"GET", "/v1/sandboxes/{id}/files/list", team, (*Server).listDir},
	{"GET", "/v1/sandboxes/{id}/files/stat", team, (*Server).statFile},
	{"POST", "/v1/sandboxes/{id}/files/mkdir", team, (*Server).makeDir},
	{"POST", "/v1/sandboxes/{id}/files/rename", team, (*Server).rename},
	{"GET", "/v1/sandboxes/{id}/files/watch", team, (*Server).watchDir},

	{"POST", "/v1/keys", admin, (*Server).createKey},
	{"GET", "/v1/keys", team, (*Server).listKeys},
	{"DELETE", "/v1/keys/{id}", team, (*Server).revokeKey},
	{"POST", "/v1/keys/{id}/rotate", team, (*Server).rotateKey},
	{"GET", "/v1/quotas", team, (*Server).getOwnQuotas},
	{"GET", "/v1/teams/{team}/quotas", admin, (*Server).getTeamQuotas},
	{"PUT", "/v1/teams/{team}/quotas", admin, (*Server).setTeamQuotas},
	{"GET", "/v1/templates", team, (*Server).listTemplates},
	{"POST", "/v1/templates/{name}/build", team, (*Server).buildTemplate},
	{"POST", "/v1/templates/{name}/coldboot", admin, (*Server).coldBoot},
	{"GET", "/v1/templates/{name}/versions", team, (*Server).listVersions},
	{"GET", "/v1/templates/{name}/builds", team, (*Server).listBuilds},
	{"GET", "/v1/templates/{name}/builds/{build}", team, (*Server).getBuild},
	{"GET", "/v1/templates/{name}/builds/{build}/logs", team, (*Server).buildLogs},

	{"POST", "/v1/apps", team, (*Server).createApp},
	{"GET", "/v1/apps", team, (*Server).listApps},
	{"GET", "/v1/apps/{name}", team, (*Server).getApp},
	{"DELETE", "/v1/apps/{name}", team, (*Server).deleteApp},
	{"POST", "/v1/apps/{name}/deploys", team, (*Server).createDeploy},
	{"GET", "/v1/apps/{name}/deploys", team, (*Server).listDeploys},
	{"GET", "/v1/apps/{name}/deploys/{id}", team, (*Server).getDeploy},
	{"GET", "/v1/apps/{name}/deploys/{id}/logs", team, (*Server).deployLogs},
	{"POST", "/v1/apps/{name}/rollback", team, (*Server).rollbackApp},
	{"GET", "/v1/apps/{name}/previews", team, (*Server).listPreviews},
	{"POST", "/v1/apps/{id}/hooks/github", public, (*Server).githubHook},
	{"GET", "/git/{repo}/info/refs", public, (*Server).gitRemote},
	{"POST", "/git/{repo}/git-upload-pack", public, (*Server).gitRemote},
	{"POST", "/git/{repo}/git-receive-pack", public, (*Server).gitRemote},
	{"POST", "/v1/functions", team, (*Server).deployFunction},
	{"GET", "/v1/functions", team, (*Server).listFunctions},
	{"GET", "/v1/functions/{name}", team, (*Server).getFunction},
	{"DELETE", "/v1/functions/{name}", team, (*Server).deleteFunction},
	{"POST", "/v1/functions/{name}/invoke", team, (*Server).invokeFunction},
	{"GET", "/v1/functions/{name}/invocations/{id}", team, (*Server).getInvocation},
	{"POST", "/v1/schedules", team, (*Server).createSchedule},
	{"GET", "/v1/schedules", team, (*Server).listSchedules},
	{"GET", "/v1/schedules/{id}", team, (*Server).getSchedule},
	{"DELETE", "/v1/schedules/{id}", team, (*Server).deleteSchedule},
	{"GET", "/v1/schedules/{id}/runs", team, (*Server).scheduleRuns},

	{"POST", "/v1/admin/bench/floor", admin, (*Server).benchFloor},
	{"GET", "/v1/admin/bench/usage", admin, (*Server).benchUsage},
	{"POST", "/v1/admin/bench/databases/{id}/pgbench", admin, (*Server).benchDatabasePgbench},
	{"POST", "/v1/admin/bench/databases/{id}/fork-floor", admin, (*Server).benchDatabaseForkFloor},
}

// Route describes one served route.
type Route struct {
	Method string // GET, POST, PUT, DELETE
	Path   string // e.g. /v1/sandboxes/{id}
	Access string // "public", "team" or "admin"
}

// Routes lists every route the server serves.
func Routes() []Route {
	out := make([]Route, len(routeTable))
	for i, rt := range routeTable {
		out[i] = Route{Method: rt.method, Path: rt.path, Access: rt.access.String()}
	}
	return out
}

// buildHandler assembles the mux from routeTable and wraps it in the
// request-id, logging and recovery middleware.
func (s *Server) buildHandler() http.Handler {
	mux := http.NewServeMux()
	methods := map[string][]string{}
	for _, rt := range routeTable {
		mux.Handle(rt.method+" "+rt.path, s.endpoint(rt))
		methods[rt.path] = append(methods[rt.path], rt.method)
	}
	// A known path with the wrong method: a JSON 405 instead of the mux's
	// plain-text one. Patterns with a method are more specific, so these
	// only catch what the routes above do not.
	for path, ms := range methods {
		sort.Strings(ms)
		allow := strings.Join(ms, ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeErrorBody(w, codeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, path, allow))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeErrorBody(w, pandastack.ENotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return s.middleware(s.withHosts(mux))
}

// endpoint turns a route into an http.Handler: it authenticates the caller
// as the route demands, runs the handler and writes its error, if any.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.access != public {
			p, err := s.authenticate(r)
			if err == nil && rt.access == admin && !p.key.Admin {
				err = errForbidden
			}
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			setPrincipal(r, p)
			if err := s.rateLimit(w, r, p); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		if err := rt.handle(s, w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}
