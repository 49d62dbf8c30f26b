package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

type buildLine struct {
	Type     string `json:"type"`
	Line     string `json:"line"`
	Template *struct {
		Name string `json:"name"`
	} `json:"template"`
	Error *struct{ Code, Message string } `json:"error"`
}

func buildLines(t *testing.T, r response) []buildLine {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q; body %s", ct, r.Body)
	}
	var out []buildLine
	for _, l := range strings.Split(strings.TrimSpace(string(r.Body)), "\n") {
		var b buildLine
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestTemplates(t *testing.T) {
	env := apitest.Start(t)
	t.Run("list", func(t *testing.T) {
		r := call(t, env, req{method: "GET", path: "/v1/templates", key: env.Key})
		list := decode[struct{ Templates []struct{ Name string } }](t, r)
		if len(list.Templates) != 1 || list.Templates[0].Name != "base" {
			t.Fatalf("templates %+v", list)
		}
	})
	t.Run("build streams the log and ends with done", func(t *testing.T) {
		env.Builder.Lines = []string{"step 1", "step 2\r", "partial line without newline"}
		defer func() { env.Builder.Lines = nil }()
		r := call(t, env, req{method: "POST", path: "/v1/templates/python/build", key: env.AdminKey})
		wantStatus(t, r, http.StatusOK)
		got := buildLines(t, r)
		var logs []string
		for _, l := range got[:len(got)-1] {
			if l.Type != "log" {
				t.Fatalf("line %+v", l)
			}
			logs = append(logs, l.Line)
		}
		if strings.Join(logs, "|") != "step 1|step 2|partial line without newline" {
			t.Fatalf("log lines %q", logs)
		}
		if last := got[len(got)-1]; last.Type != "done" || last.Template.Name != "python" {
			t.Fatalf("last line %+v", last)
		}
		list := call(t, env, req{method: "GET", path: "/v1/templates", key: env.Key})
		if !strings.Contains(string(list.Body), `"name":"python"`) {
			t.Fatalf("built template not listed: %s", list.Body)
		}
	})
	t.Run("failure after output is an error line", func(t *testing.T) {
		env.Builder.Lines = []string{"working"}
		env.Builder.Fail = func(string) error { return pandastack.Errorf(pandastack.EInvalid, "no recipe for template nope") }
		defer func() { env.Builder.Fail = nil }()
		r := call(t, env, req{method: "POST", path: "/v1/templates/nope/build", key: env.AdminKey})
		got := buildLines(t, r)
		last := got[len(got)-1]
		if len(got) != 2 || last.Type != "error" || last.Error.Code != "invalid_argument" || last.Error.Message != "no recipe for template nope" {
			t.Fatalf("lines %+v", got)
		}
	})
	t.Run("failure before output is a JSON error", func(t *testing.T) {
		env.Builder.Lines = nil
		env.Builder.Fail = func(string) error { return pandastack.Errorf(pandastack.ENotFound, "no recipe for template nope") }
		defer func() { env.Builder.Fail = nil }()
		wantError(t, call(t, env, req{method: "POST", path: "/v1/templates/nope/build", key: env.AdminKey}), 404, "not_found", "no recipe")
	})
	t.Run("bad name", func(t *testing.T) {
		wantError(t, call(t, env, req{method: "POST", path: "/v1/templates/-x/build", key: env.AdminKey}), 400, "invalid_argument", "template name")
	})
}

func TestBuildWithoutBuilder(t *testing.T) {
	env := apitest.Start(t, func(c *api.Config) {
		c.Builder, c.Templates = nil, registry.New(registry.Config{Store: c.Store, LogDir: t.TempDir()})
	})
	wantError(t, call(t, env, req{method: "POST", path: "/v1/templates/base/build", key: env.AdminKey}), 503, "unavailable", "does not build templates")
}
