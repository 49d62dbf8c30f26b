package api_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

// specTar is a build context holding only a spec.
func specTar(t *testing.T, spec string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: ".pandastack-spec", Mode: 0o644, Size: int64(len(spec))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(spec))
	tw.Close()
	return buf.Bytes()
}

type builtTemplate struct {
	TeamID  string `json:"team_id"`
	Name    string `json:"name"`
	ID      string `json:"id"`
	Version int    `json:"version"`
}

type buildDone struct {
	Type     string         `json:"type"`
	Template *builtTemplate `json:"template"`
	Build    *struct {
		ID     string `json:"id"`
		TeamID string `json:"team_id"`
		Status string `json:"status"`
	} `json:"build"`
	Error *struct{ Code, Message string } `json:"error"`
}

// buildCustom uploads a spec as key and returns the stream's last line.
func buildCustom(t *testing.T, env *apitest.Env, key, name, spec, query string) (response, buildDone) {
	t.Helper()
	r := call(t, env, req{method: "POST", path: "/v1/templates/" + name + "/build" + query, key: key,
		body: specTar(t, spec), header: map[string]string{"Content-Type": "application/x-tar"}})
	if r.Status != http.StatusOK {
		return r, buildDone{}
	}
	lines := strings.Split(strings.TrimSpace(string(r.Body)), "\n")
	var last buildDone
	if err := jsonUnmarshal(lines[len(lines)-1], &last); err != nil {
		t.Fatal(err)
	}
	return r, last
}

func mustBuildCustom(t *testing.T, env *apitest.Env, key, name, spec, query string) buildDone {
	t.Helper()
	r, d := buildCustom(t, env, key, name, spec, query)
	if r.Status != http.StatusOK || d.Type != "done" || d.Template == nil {
		t.Fatalf("build %s: status %d, last line %+v; body %s", name, r.Status, d, r.Body)
	}
	return d
}

type listedTemplate struct {
	TeamID string `json:"team_id"`
	Name   string `json:"name"`
}

func listed(t *testing.T, env *apitest.Env, key string) []string {
	t.Helper()
	l := decode[struct{ Templates []listedTemplate }](t, call(t, env, req{method: "GET", path: "/v1/templates", key: key}))
	var out []string
	for _, tp := range l.Templates {
		if tp.TeamID != "" {
			out = append(out, tp.Name+"(own)")
		} else {
			out = append(out, tp.Name)
		}
	}
	return out
}

// Any team key builds custom templates of its own; two teams' "web" are two
// templates; each team lists, versions and creates from only its own plus
// the public catalog; another team's name, build and log answer 404 exactly
// like missing ones.
func TestTeamTemplates(t *testing.T) {
	env := apitest.Start(t)
	initech, _, err := api.CreateKey(context.Background(), env.Store, "initech", "test", false)
	if err != nil {
		t.Fatal(err)
	}
	acme := mustBuildCustom(t, env, env.Key, "web", "FROM base\nRUN acme", "")
	globex := mustBuildCustom(t, env, env.OtherKey, "web", "FROM base\nRUN globex", "")
	if acme.Template.Version != 1 || globex.Template.Version != 1 || acme.Template.ID == globex.Template.ID ||
		acme.Template.TeamID == "" || globex.Template.TeamID == "" || acme.Template.TeamID == globex.Template.TeamID {
		t.Fatalf("two teams' web: %+v and %+v", acme.Template, globex.Template)
	}
	if acme.Build == nil || acme.Build.Status != "succeeded" || acme.Build.TeamID != acme.Template.TeamID {
		t.Fatalf("acme's build record: %+v", acme.Build)
	}

	t.Run("each team lists its own and the public catalog", func(t *testing.T) {
		for key, want := range map[string]string{env.Key: "base,web(own)", env.OtherKey: "base,web(own)", initech: "base"} {
			if got := strings.Join(listed(t, env, key), ","); got != want {
				t.Errorf("lists %s, want %s", got, want)
			}
		}
	})

	t.Run("creates resolve within the team", func(t *testing.T) {
		for key, wantID := range map[string]string{env.Key: acme.Template.ID, env.OtherKey: globex.Template.ID} {
			r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: key, body: map[string]any{"template": "web:1"}})
			wantStatus(t, r, http.StatusCreated)
			sb := decode[struct {
				Template        string `json:"template"`
				TemplateID      string `json:"template_id"`
				TemplateVersion int    `json:"template_version"`
			}](t, r)
			if sb.Template != "web" || sb.TemplateID != wantID || sb.TemplateVersion != 1 {
				t.Errorf("sandbox from web:1 = %+v, want build %s", sb, wantID)
			}
		}
		missing := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: initech, body: map[string]any{"template": "nope"}})
		other := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: initech, body: map[string]any{"template": "web"}})
		sameAsMissing(t, "create", other, missing, "web", "nope")
		// Naming another team's exact build does not reach it either.
		r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.OtherKey,
			body: map[string]any{"template": "web@" + acme.Template.ID}})
		wantError(t, r, http.StatusNotFound, "not_found", "has no build")
	})

	t.Run("versions, builds, build info and logs are the team's", func(t *testing.T) {
		vs := decode[struct{ Versions []struct{ ID string } }](t,
			call(t, env, req{method: "GET", path: "/v1/templates/web/versions", key: env.OtherKey}))
		if len(vs.Versions) != 1 || vs.Versions[0].ID != globex.Template.ID {
			t.Errorf("globex's versions of web: %+v", vs)
		}
		sameAsMissing(t, "versions",
			call(t, env, req{method: "GET", path: "/v1/templates/web/versions", key: initech}),
			call(t, env, req{method: "GET", path: "/v1/templates/nope/versions", key: initech}), "web", "nope")
		bs := decode[struct{ Builds []struct{ ID string } }](t,
			call(t, env, req{method: "GET", path: "/v1/templates/web/builds", key: env.Key}))
		if len(bs.Builds) != 1 || bs.Builds[0].ID != acme.Build.ID {
			t.Errorf("acme's builds of web: %+v", bs)
		}
		none := decode[struct{ Builds []struct{ ID string } }](t,
			call(t, env, req{method: "GET", path: "/v1/templates/web/builds", key: initech}))
		if len(none.Builds) != 0 {
			t.Errorf("initech lists builds of web: %+v", none)
		}
		const missingID = "bld_0123456789abcdef"
		for _, suffix := range []string{"", "/logs"} {
			wantStatus(t, call(t, env, req{method: "GET", path: "/v1/templates/web/builds/" + acme.Build.ID + suffix, key: env.Key}), 200)
			sameAsMissing(t, "build"+suffix,
				call(t, env, req{method: "GET", path: "/v1/templates/web/builds/" + acme.Build.ID + suffix, key: env.OtherKey}),
				call(t, env, req{method: "GET", path: "/v1/templates/web/builds/" + missingID + suffix, key: env.OtherKey}),
				acme.Build.ID, missingID)
		}
	})

	t.Run("FROM resolves within the team", func(t *testing.T) {
		mustBuildCustom(t, env, env.Key, "web-child", "FROM web:1\nRUN more", "")
		r, _ := buildCustom(t, env, initech, "child", "FROM web\nRUN more", "")
		wantError(t, r, http.StatusNotFound, "not_found", "FROM web")
	})

	t.Run("public names are reserved", func(t *testing.T) {
		r, _ := buildCustom(t, env, env.Key, "base", "FROM base\nRUN x", "")
		wantError(t, r, http.StatusConflict, "conflict", "public template")
		r, _ = buildCustom(t, env, env.Key, "code-interpreter", "FROM base\nRUN x", "")
		wantError(t, r, http.StatusConflict, "conflict", "public template")
	})

	t.Run("tags and versions move per team", func(t *testing.T) {
		v2 := mustBuildCustom(t, env, env.Key, "web", "FROM base\nRUN acme two", "?tag=prod")
		if v2.Template.Version != 2 {
			t.Fatalf("acme's second web is version %d", v2.Template.Version)
		}
		r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.Key, body: map[string]any{"template": "web:prod"}})
		wantStatus(t, r, http.StatusCreated)
		r = call(t, env, req{method: "POST", path: "/v1/sandboxes", key: env.OtherKey, body: map[string]any{"template": "web:prod"}})
		wantError(t, r, http.StatusNotFound, "not_found", `no version or tag "prod"`)
	})

	t.Run("a team key cannot build for another team or build the catalog", func(t *testing.T) {
		r, _ := buildCustom(t, env, env.Key, "x", "FROM base\n", "?team=globex")
		wantError(t, r, http.StatusForbidden, "forbidden", "admin key")
		wantError(t, call(t, env, req{method: "POST", path: "/v1/templates/base/build", key: env.Key}), http.StatusForbidden, "forbidden", "admin API key")
	})
}

// sameAsMissing checks that what another team's name answers is what a
// name nobody has answers (status, code, and message but for the name).
func sameAsMissing(t *testing.T, what string, other, missing response, otherName, missingName string) {
	t.Helper()
	if other.Status != http.StatusNotFound || missing.Status != http.StatusNotFound {
		t.Fatalf("%s: another team's answers %d %s, a missing one %d %s", what, other.Status, other.Body, missing.Status, missing.Body)
	}
	o, m := decode[apiError](t, other), decode[apiError](t, missing)
	if o.Error.Code != m.Error.Code || strings.ReplaceAll(o.Error.Message, otherName, "X") != strings.ReplaceAll(m.Error.Message, missingName, "X") {
		t.Errorf("%s: another team's answers %+v, a missing one %+v", what, o.Error, m.Error)
	}
}

// The admin key's custom builds go to the public catalog (every team sees
// and creates from them), or to the team ?team= names.
func TestAdminCustomBuilds(t *testing.T) {
	env := apitest.Start(t)
	pub := mustBuildCustom(t, env, env.AdminKey, "shared", "FROM base\nRUN s", "")
	if pub.Template.TeamID != "" {
		t.Fatalf("an admin build landed in team %q, want the public catalog", pub.Template.TeamID)
	}
	for _, key := range []string{env.Key, env.OtherKey, env.AdminKey} {
		if got := strings.Join(listed(t, env, key), ","); got != "base,shared" {
			t.Errorf("lists %s after a public build", got)
		}
		wantStatus(t, call(t, env, req{method: "POST", path: "/v1/sandboxes", key: key, body: map[string]any{"template": "shared"}}), http.StatusCreated)
	}
	forGlobex := mustBuildCustom(t, env, env.AdminKey, "tool", "FROM base\nRUN t", "?team=globex")
	if forGlobex.Template.TeamID == "" {
		t.Fatal("an admin build for globex landed in the public catalog")
	}
	if got := strings.Join(listed(t, env, env.OtherKey), ","); got != "base,shared,tool(own)" {
		t.Errorf("globex lists %s", got)
	}
	if got := strings.Join(listed(t, env, env.Key), ","); got != "base,shared" {
		t.Errorf("acme lists %s", got)
	}
	r, _ := buildCustom(t, env, env.AdminKey, "tool", "FROM base\n", "?team=nosuchteam")
	wantError(t, r, http.StatusNotFound, "not_found", "nosuchteam")
	// Public names stay reserved for teams.
	r, _ = buildCustom(t, env, env.Key, "shared", "FROM base\nRUN mine", "")
	wantError(t, r, http.StatusConflict, "conflict", "public template")
}

// A team runs at most a few custom builds at once: the next answers 429
// quota_exceeded naming the limit; other teams and the admin go on.
func TestTeamBuildsAreCapped(t *testing.T) {
	env := apitest.Start(t)
	env.Builder.Block = make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(env.Builder.Block)
		}
	}
	defer release()
	done := make(chan int, 2)
	for i := range 2 {
		go func() {
			hr, _ := http.NewRequest("POST", env.URL+"/v1/templates/slow"+string(rune('a'+i))+"/build", bytes.NewReader(specTar(t, "FROM base\nRUN slow")))
			hr.Header.Set("Authorization", "Bearer "+env.Key)
			hr.Header.Set("Content-Type", "application/x-tar")
			resp, err := http.DefaultClient.Do(hr)
			if err != nil {
				done <- 0
				return
			}
			body, _ := io.ReadAll(resp.Body) // the build streams until it ends
			resp.Body.Close()
			if !strings.Contains(string(body), `"type":"done"`) {
				done <- 0
				return
			}
			done <- resp.StatusCode
		}()
	}
	team, _ := env.Store.TeamByName(context.Background(), "acme")
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, _ := env.Templates.Builds(context.Background(), team.ID, "slowa")
		b, _ := env.Templates.Builds(context.Background(), team.ID, "slowb")
		if len(a) == 1 && len(b) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two builds did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r, _ := buildCustom(t, env, env.Key, "third", "FROM base\nRUN 3", "")
	wantError(t, r, http.StatusTooManyRequests, "quota_exceeded", "limit 2")
	release()
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a capped team's build ended %d", code)
		}
	}
	mustBuildCustom(t, env, env.Key, "third", "FROM base\nRUN 3", "")
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
