package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// gitPushReadTimeout bounds reading a push's body (larger than the API's
// usual body deadline: a pack of MaxRepoBytes over a slow link).
const gitPushReadTimeout = 10 * time.Minute

// gitRemote serves an app's git remote over smart HTTP at
// /git/NAME.git/…: git sends the API key as the password of HTTP basic
// auth (any user name), e.g. `git remote add pandastack
// http://x:pds_…@HOST:PORT/git/NAME.git` or a credential helper. No
// credentials is a 401 with a Basic challenge, so git asks its helper;
// another team's app is a 404, like one that does not exist.
func (s *Server) gitRemote(w http.ResponseWriter, r *http.Request) error {
	svc, err := s.apps()
	if err != nil {
		return err
	}
	_, secret, ok := r.BasicAuth()
	if !ok || secret == "" {
		// A Bearer key works too (scripts, the SDKs).
		secret = bearer(r)
	}
	if secret == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="pandastack git", charset="UTF-8"`)
		return errMissingKey
	}
	p, err := s.principalFor(r, strings.TrimSpace(secret))
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.EUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="pandastack git", charset="UTF-8"`)
		}
		return err
	}
	setPrincipal(r, p)
	if err := s.rateLimit(w, r, p); err != nil {
		return err
	}
	name, ok := strings.CutSuffix(r.PathValue("repo"), ".git")
	if !ok {
		name = r.PathValue("repo")
	}
	service := "info/refs"
	if !strings.HasSuffix(r.URL.Path, "/info/refs") {
		service = r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	}
	if r.Method == http.MethodPost {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(gitPushReadTimeout))
	}
	if err := svc.ServeGit(w, r, p.team.ID, name, service); err != nil {
		return wrap(err, "git remote")
	}
	return nil
}
