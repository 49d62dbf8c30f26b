package router

import (
	"net/http"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// grant is why a request may reach a sandbox port.
type grant struct {
	token   string    // the signed token presented, if any
	expires time.Time // the token's expiry
	fromURL bool      // the token came in ?ps_token= (not the cookie)
}

// portAccess decides who may reach a sandbox port: anyone for a public
// port, the holder of a valid signed token, or a key of the owning team.
// It strips the token (query and cookie) and the API key from r, so the
// sandbox never sees them.
func (h *HTTPRouter) portAccess(r *http.Request, id string, port int, auth Authenticate) (grant, error) {
	var g grant
	q := r.URL.Query()
	if g.token = q.Get(TokenParam); g.token != "" {
		g.fromURL = true
		q.Del(TokenParam)
		r.URL.RawQuery = q.Encode()
	} else if c, err := r.Cookie(TokenParam); err == nil {
		g.token = c.Value
	}
	stripCookie(r, TokenParam)
	sb, gerr := h.cfg.Sandboxes.GetSandbox(r.Context(), id)
	if gerr == nil && sb.ManagedBy != "" {
		// A platform service's machine (a database's, an app release) is
		// reached through its service's own route, never at PORT-ID.
		return grant{}, pandastack.Errorf(pandastack.ENotFound, "sandbox %s not found", id)
	}
	if gerr == nil && h.cfg.Policies != nil && sb.State.Live() && h.cfg.Policies.Policy(sb.ID).PortIsPublic(port) {
		return grant{}, nil
	}
	if g.token != "" {
		exp, ok := time.Time{}, false
		if gerr == nil {
			exp, ok = checkToken(h.cfg.Secret, g.token, sb.ID, port)
		}
		if !ok {
			return grant{}, pandastack.Errorf(pandastack.EUnauthorized, "the signed URL for port %d of %s is invalid or expired", port, id)
		}
		if !g.fromURL && crossSite(r) {
			// Every sandbox host is same-site with every other: a page
			// in another sandbox must not ride on this cookie.
			return grant{}, pandastack.Errorf(pandastack.EForbidden,
				"the signed-URL cookie of port %d of %s is not accepted from another site (sandbox hosts are separate sites); open the signed URL itself", port, id)
		}
		g.expires = exp
		return g, nil
	}
	team, err := auth(r)
	if err != nil {
		return grant{}, err
	}
	if gerr != nil || sb.TeamID != team {
		return grant{}, pandastack.Errorf(pandastack.ENotFound, "sandbox %s not found", id)
	}
	return grant{}, nil
}

// setTokenCookie keeps a signed URL's token in a cookie for this host only
// (no Domain attribute), until the token expires, so the page's own
// requests pass. It is Secure when the request came over TLS.
func (h *HTTPRouter) setTokenCookie(w http.ResponseWriter, r *http.Request, g grant) {
	http.SetCookie(w, &http.Cookie{Name: TokenParam, Value: g.token, Path: "/", HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, Expires: g.expires})
}

// isNavigation reports whether r is a browser opening a page (not a
// script, an image or a non-browser client).
func isNavigation(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.Header.Get("Sec-Fetch-Mode") == "navigate"
}

// crossSite reports whether a browser sent r from another site (for a
// sandbox host, any other host under the domain), other than by a
// top-level GET navigation, which SameSite=Lax allows too.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-site", "cross-site":
		return !isNavigation(r)
	}
	return false
}

// stripCookie removes one cookie from the request before it is forwarded.
func stripCookie(r *http.Request, name string) {
	cs := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cs {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}

// isolateCookies keeps a backend's cookies on its own host: it drops the
// Domain attribute of every Set-Cookie (a sandbox must not set cookies for
// its neighbours under the shared domain) and any cookie named like the
// router's token.
func isolateCookies(resp *http.Response) error {
	sc := resp.Header.Values("Set-Cookie")
	if len(sc) == 0 {
		return nil
	}
	resp.Header.Del("Set-Cookie")
	for _, c := range sc {
		parts := strings.Split(c, ";")
		name, _, _ := strings.Cut(parts[0], "=")
		if strings.TrimSpace(name) == TokenParam {
			continue
		}
		kept := parts[:1]
		for _, p := range parts[1:] {
			k, _, _ := strings.Cut(p, "=")
			if !strings.EqualFold(strings.TrimSpace(k), "domain") {
				kept = append(kept, p)
			}
		}
		resp.Header.Add("Set-Cookie", strings.Join(kept, ";"))
	}
	return nil
}
