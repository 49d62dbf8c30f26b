package router_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

const sbx = "sbx_0123456789abcdef0123"

type env struct {
	sb     *sandboxes
	table  *router.Table
	url    string
	secret []byte
}

func start(t *testing.T) *env {
	t.Helper()
	e := &env{sb: newSandboxes(), table: router.NewTable(), secret: []byte("0123456789abcdef0123456789abcdef")}
	e.sb.add(sbx, "team_acme")
	e.sb.listen(t, sbx, 8000, echo("app"))
	h := router.NewHTTP(router.HTTPConfig{Domain: "Sandbox.Test", Table: e.table, Sandboxes: e.sb, Guests: e.sb, Policies: e.sb, Secret: e.secret})
	srv := httptest.NewServer(front(h))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

type resp struct {
	status  int
	body    string
	code    string
	header  http.Header
	cookies []*http.Cookie
}

// get sends a request for host through the router; hdr are header pairs.
func (e *env) do(t *testing.T, method, host, pathQuery string, hdr ...string) resp {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+pathQuery, nil)
	req.Host = host
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	out := resp{status: r.StatusCode, body: string(b), header: r.Header, cookies: r.Cookies()}
	var eb struct {
		Error struct{ Code string } `json:"error"`
	}
	if json.Unmarshal(b, &eb) == nil {
		out.code = eb.Error.Code
	}
	return out
}

func TestSandboxPortAccess(t *testing.T) {
	e := start(t)
	host := "8000-" + sbx + ".sandbox.test"
	for _, tt := range []struct {
		name, host string
		hdr        []string
		status     int
		want       string // body prefix or error code
	}{
		{"a key of the team reaches the port, and the key is stripped", host, []string{"Authorization", "Bearer key-acme"}, 200, `app GET /x auth=""`},
		{"the host matches in any case and with the port", "8000-" + sbx + ".SANDBOX.test:443", []string{"Authorization", "Bearer key-acme"}, 200, "app GET"},
		{"no key", host, nil, 401, "unauthorized"},
		{"another team's key sees no such sandbox", host, []string{"Authorization", "Bearer key-globex"}, 404, "not_found"},
		{"nothing listens", "9-" + sbx + ".sandbox.test", []string{"Authorization", "Bearer key-acme"}, 502, "connection_refused"},
		{"port out of range", "70000-" + sbx + ".sandbox.test", []string{"Authorization", "Bearer key-acme"}, 400, "invalid_argument"},
		{"not PORT-ID", "www.sandbox.test", []string{"Authorization", "Bearer key-acme"}, 400, "invalid_argument"},
		{"unknown sandbox", "8000-sbx_ffff.sandbox.test", []string{"Authorization", "Bearer key-acme"}, 404, "not_found"},
		{"the API's own host is not the router's", "api.example.com", nil, 200, "api"},
		{"two labels under the domain are not a sandbox", "a.b.sandbox.test", nil, 200, "api"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(t, "GET", tt.host, "/x", tt.hdr...)
			if r.status != tt.status || !(strings.HasPrefix(r.body, tt.want) || r.code == tt.want) {
				t.Fatalf("got %d %q, want %d %q", r.status, r.body, tt.status, tt.want)
			}
		})
	}
	t.Run("a public port needs no key", func(t *testing.T) {
		e.sb.pol[sbx] = pandastack.NetworkPolicy{PublicPorts: []int{8000}}
		defer delete(e.sb.pol, sbx)
		if r := e.do(t, "GET", host, "/"); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("a platform service's machine is not served at PORT-ID, even public", func(t *testing.T) {
		e.sb.mu.Lock()
		rec := e.sb.recs[sbx]
		rec.ManagedBy = "database:db-orders"
		e.sb.recs[sbx] = rec
		e.sb.pol[sbx] = pandastack.NetworkPolicy{PublicPorts: []int{8000}}
		e.sb.mu.Unlock()
		defer func() {
			e.sb.mu.Lock()
			rec.ManagedBy = ""
			e.sb.recs[sbx] = rec
			delete(e.sb.pol, sbx)
			e.sb.mu.Unlock()
		}()
		for _, hdr := range [][]string{nil, {"Authorization", "Bearer key-acme"}} {
			if r := e.do(t, "GET", host, "/", hdr...); r.status != 404 || r.code != "not_found" {
				t.Fatalf("%v: %d %s", hdr, r.status, r.body)
			}
		}
	})
}

func TestSignedURLs(t *testing.T) {
	e := start(t)
	host := "8000-" + sbx + ".sandbox.test"
	tok := router.SignPort(e.secret, sbx, 8000, time.Now().Add(time.Hour))

	t.Run("the token is stripped and kept in a cookie for this host only", func(t *testing.T) {
		r := e.do(t, "GET", host, "/page?a=1&ps_token="+tok)
		if r.status != 200 || r.body != `app GET /page?a=1 auth="" cookie=""` {
			t.Fatalf("%d %q", r.status, r.body)
		}
		if len(r.cookies) != 1 {
			t.Fatalf("cookies %v", r.cookies)
		}
		c := r.cookies[0]
		if c.Name != router.TokenParam || c.Value != tok || c.Domain != "" || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Expires.IsZero() {
			t.Fatalf("cookie %+v: want ps_token, host-only, HttpOnly, Lax, expiring with the token", c)
		}
	})
	t.Run("a browser opening the URL is sent to it without the token", func(t *testing.T) {
		before := e.sb.dialCount()
		r := e.do(t, "GET", host, "/page?a=1&ps_token="+tok, "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Site", "cross-site")
		if r.status != http.StatusFound || r.header.Get("Location") != "/page?a=1" {
			t.Fatalf("%d Location %q: want 302 to /page?a=1", r.status, r.header.Get("Location"))
		}
		if len(r.cookies) != 1 || r.cookies[0].Value != tok || r.header.Get("Referrer-Policy") != "no-referrer" {
			t.Fatalf("cookies %v, Referrer-Policy %q", r.cookies, r.header.Get("Referrer-Policy"))
		}
		if n := e.sb.dialCount() - before; n != 0 {
			t.Errorf("the redirect reached the sandbox (%d dials)", n)
		}
	})
	cookie := router.TokenParam + "=" + tok + "; theme=dark"
	t.Run("the cookie passes and only the app's cookies are forwarded", func(t *testing.T) {
		r := e.do(t, "GET", host, "/next", "Cookie", cookie, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors")
		if r.status != 200 || r.body != `app GET /next auth="" cookie="theme=dark"` {
			t.Fatalf("%d %q", r.status, r.body)
		}
	})
	t.Run("another sandbox's page cannot ride on the cookie", func(t *testing.T) {
		for _, mode := range []string{"cors", "no-cors"} {
			r := e.do(t, "GET", host, "/", "Cookie", cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", mode)
			if r.status != 403 || r.code != "forbidden" {
				t.Fatalf("%s: %d %q, want 403", mode, r.status, r.body)
			}
		}
		r := e.do(t, "POST", host, "/", "Cookie", cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate")
		if r.status != 403 {
			t.Fatalf("a form POST from a sibling: %d, want 403", r.status)
		}
		// A link followed to the page is what SameSite=Lax allows too.
		if r := e.do(t, "GET", host, "/", "Cookie", cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate"); r.status != 200 {
			t.Fatalf("top-level navigation from a sibling: %d", r.status)
		}
	})
	for name, bad := range map[string]string{
		"tampered":   tok + "x",
		"other port": router.SignPort(e.secret, sbx, 8001, time.Now().Add(time.Hour)),
		"expired":    router.SignPort(e.secret, sbx, 8000, time.Now().Add(-time.Minute)),
		"other key":  router.SignPort([]byte("another secret of thirty-two byt"), sbx, 8000, time.Now().Add(time.Hour)),
	} {
		t.Run(name+" token", func(t *testing.T) {
			if r := e.do(t, "GET", host, "/?ps_token="+bad); r.status != 401 {
				t.Fatalf("%d %q, want 401", r.status, r.body)
			}
		})
	}
}

func TestBackendCookiesStayOnTheirHost(t *testing.T) {
	e := start(t)
	e.sb.listen(t, sbx, 8001, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "session=evil; Domain=.sandbox.test; Path=/; HttpOnly")
		w.Header().Add("Set-Cookie", "ps_token=x; domain=sandbox.test")
		w.Header().Add("Set-Cookie", "plain=1; Max-Age=60; Secure")
	}))
	r := e.do(t, "GET", "8001-"+sbx+".sandbox.test", "/", "Authorization", "Bearer key-acme")
	got := strings.Join(r.header.Values("Set-Cookie"), " | ")
	if got != "session=evil; Path=/; HttpOnly | plain=1; Max-Age=60; Secure" {
		t.Fatalf("Set-Cookie %q: want Domain dropped and no ps_token", got)
	}
	// An app's hostname under the shared domain is isolated the same way;
	// a custom domain belongs to its owner, who may share cookies with its
	// own subdomains.
	for host, want := range map[string]string{
		"shop.apps.sandbox.test": "session=evil; Path=/; HttpOnly",
		"shop.example.org":       "session=evil; Domain=.sandbox.test; Path=/; HttpOnly",
	} {
		if err := e.table.Register(router.Route{Host: host, Backend: router.GuestPort{Guests: e.sb, SandboxID: sbx, Port: 8001}, Access: router.Access{Public: true}}); err != nil {
			t.Fatal(err)
		}
		r := e.do(t, "GET", host, "/")
		if got := r.header.Values("Set-Cookie"); len(got) == 0 || got[0] != want {
			t.Errorf("%s: Set-Cookie %q, want first %q", host, got, want)
		}
	}
}

func TestRegisteredHostnames(t *testing.T) {
	e := start(t)
	e.sb.listen(t, sbx, 3000, echo("web"))
	if err := e.table.Register(router.Route{Host: "Web.Apps.Sandbox.Test", Backend: router.GuestPort{Guests: e.sb, SandboxID: sbx, Port: 3000}, Access: router.Access{Public: true}}); err != nil {
		t.Fatal(err)
	}
	if err := e.table.Register(router.Route{Host: "admin.example.org", Backend: router.GuestPort{Guests: e.sb, SandboxID: sbx, Port: 3000}, Access: router.Access{TeamID: "team_acme"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.table.Register(router.Route{Host: "web.apps.sandbox.test.", Backend: router.Addr{Network: "tcp", Address: "127.0.0.1:1"}}); pandastack.ErrorCode(err) != pandastack.EConflict {
		t.Fatalf("a taken hostname: %v, want conflict", err)
	}
	if r := e.do(t, "GET", "web.apps.sandbox.test", "/hi", "Authorization", "Basic YTpi"); r.status != 200 || !strings.HasPrefix(r.body, `web GET /hi auth="Basic YTpi"`) {
		t.Fatalf("public app (its own Basic auth passes): %d %q", r.status, r.body)
	}
	if r := e.do(t, "GET", "admin.example.org", "/"); r.status != 401 {
		t.Fatalf("team app without a key: %d", r.status)
	}
	if r := e.do(t, "GET", "admin.example.org", "/", "Authorization", "Bearer key-globex"); r.status != 404 {
		t.Fatalf("team app, another team: %d", r.status)
	}
	if r := e.do(t, "GET", "admin.example.org", "/", "Authorization", "Bearer key-acme"); r.status != 200 || !strings.Contains(r.body, `auth=""`) {
		t.Fatalf("team app with its key: %d %q", r.status, r.body)
	}
	e.table.Unregister("WEB.apps.sandbox.test")
	if r := e.do(t, "GET", "web.apps.sandbox.test", "/"); r.status != 200 || r.body != "api" {
		t.Fatalf("after Unregister: %d %q, want the API's", r.status, r.body)
	}
}
