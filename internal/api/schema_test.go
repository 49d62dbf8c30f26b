package api_test

import (
	"encoding/base64"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	specpkg "github.com/pandastack/pandastack/api"
)

// spec is the parsed OpenAPI document with a checker for the small subset of
// JSON Schema it uses: $ref, type, nullable, required, properties,
// additionalProperties, items, enum, minimum, maximum and format (date-time,
// byte). Other keywords are refused, so the spec cannot drift into features
// the checker would silently ignore. Unlike JSON Schema, an object schema
// with properties but no additionalProperties rejects unknown fields: a
// response field the spec does not mention is a spec bug.
type spec struct {
	root  map[string]any
	paths map[string]map[string]any // path -> method (lower case) -> operation
	pats  []specPath
}

type specPath struct {
	path string
	re   *regexp.Regexp
}

var (
	specOnce sync.Once
	specDoc  *spec
	specErr  error
)

func loadSpec(t testing.TB) *spec {
	t.Helper()
	specOnce.Do(func() {
		var root map[string]any
		if specErr = yaml.Unmarshal(specpkg.Spec, &root); specErr != nil {
			return
		}
		s := &spec{root: root, paths: map[string]map[string]any{}}
		paths, _ := root["paths"].(map[string]any)
		for p, item := range paths {
			ops := map[string]any{}
			for k, v := range item.(map[string]any) {
				if k != "parameters" {
					ops[k] = v
				}
			}
			s.paths[p] = ops
			re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$"
			s.pats = append(s.pats, specPath{p, regexp.MustCompile(re)})
		}
		specDoc = s
	})
	if specErr != nil {
		t.Fatalf("parse api/openapi.yaml: %v", specErr)
	}
	return specDoc
}

// match finds the spec path template matching a concrete request path.
func (s *spec) match(path string) (string, bool) {
	var found []string
	for _, p := range s.pats {
		if p.re.MatchString(path) {
			found = append(found, p.path)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	// Prefer the template with the most literal text (like the mux does).
	sort.Slice(found, func(i, j int) bool {
		return strings.Count(found[i], "{") < strings.Count(found[j], "{")
	})
	return found[0], true
}

// responseSchema returns the schema the spec documents for a response. Error
// statuses the operation does not list are checked against the Error schema.
func (s *spec) responseSchema(method, path string, status int, contentType string) (map[string]any, error) {
	tmpl, ok := s.match(path)
	if !ok {
		if status == 404 || status == 405 {
			return s.schemaRef("Error"), nil
		}
		return nil, fmt.Errorf("no spec path matches %s", path)
	}
	op, ok := s.paths[tmpl][strings.ToLower(method)].(map[string]any)
	if !ok {
		if status == 405 {
			return s.schemaRef("Error"), nil
		}
		return nil, fmt.Errorf("spec has no %s %s", method, tmpl)
	}
	resps, _ := op["responses"].(map[string]any)
	resp, ok := resps[fmt.Sprint(status)].(map[string]any)
	if !ok {
		if status >= 400 {
			return s.schemaRef("Error"), nil
		}
		return nil, fmt.Errorf("spec does not document status %d for %s %s", status, method, tmpl)
	}
	resp = s.resolve(resp)
	content, _ := resp["content"].(map[string]any)
	if content == nil {
		return nil, nil // no body documented (e.g. 204)
	}
	media, ok := content[contentType].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec documents no %s body for %d of %s %s", contentType, status, method, tmpl)
	}
	sch, _ := media["schema"].(map[string]any)
	return sch, nil
}

func (s *spec) schemaRef(name string) map[string]any {
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// resolve follows $ref (only local "#/..." references).
func (s *spec) resolve(m map[string]any) map[string]any {
	for {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = s.root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cur = cur.(map[string]any)[part]
		}
		m = cur.(map[string]any)
	}
}

var annotations = []string{"description", "example", "default", "title"}

// validate checks v (decoded JSON) against schema and returns the problems.
func (s *spec) validate(schema map[string]any, v any, at string) []string {
	if schema == nil {
		return nil
	}
	schema = s.resolve(schema)
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	// oneOf (alone): the value must match exactly one alternative.
	if alts, ok := schema["oneOf"].([]any); ok && len(schema) == 1 {
		matched := 0
		var all []string
		for _, a := range alts {
			e := s.validate(a.(map[string]any), v, at)
			if len(e) == 0 {
				matched++
			}
			all = append(all, e...)
		}
		switch matched {
		case 1:
			return nil
		case 0:
			return append([]string{at + ": matches no alternative of oneOf"}, all...)
		default:
			return []string{at + fmt.Sprintf(": matches %d alternatives of oneOf, want exactly one", matched)}
		}
	}
	for k := range schema {
		switch k {
		case "type", "nullable", "required", "properties", "additionalProperties", "items",
			"enum", "minimum", "maximum", "format":
		default:
			if !slices.Contains(annotations, k) {
				bad("schema uses unsupported keyword %q", k)
			}
		}
	}
	if v == nil {
		if n, _ := schema["nullable"].(bool); !n {
			bad("null where the schema does not allow it")
		}
		return errs
	}
	typ, _ := schema["type"].(string)
	switch typ {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			bad("want object, got %T", v)
			return errs
		}
		for _, r := range asList(schema["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				bad("missing required property %q", r)
			}
		}
		props, _ := schema["properties"].(map[string]any)
		addl, hasAddl := schema["additionalProperties"]
		for k, pv := range obj {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, s.validate(ps, pv, at+"."+k)...)
				continue
			}
			switch a := addl.(type) {
			case map[string]any:
				errs = append(errs, s.validate(a, pv, at+"."+k)...)
			case bool:
				if !a {
					bad("unexpected property %q", k)
				}
			default:
				if !hasAddl && props != nil {
					bad("unexpected property %q (not in the spec)", k)
				}
			}
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			bad("want array, got %T", v)
			return errs
		}
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range arr {
				errs = append(errs, s.validate(items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("want string, got %T", v)
			return errs
		}
		switch schema["format"] {
		case "date-time":
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				bad("not a date-time: %q", str)
			}
		case "byte":
			if _, err := base64.StdEncoding.DecodeString(str); err != nil {
				bad("not base64: %q", str)
			}
		}
	case "integer", "number":
		f, ok := v.(float64)
		if !ok {
			bad("want %s, got %T", typ, v)
			return errs
		}
		if typ == "integer" && f != math.Trunc(f) {
			bad("want integer, got %v", f)
		}
		if m, ok := toFloat(schema["minimum"]); ok && f < m {
			bad("%v is below the minimum %v", f, m)
		}
		if m, ok := toFloat(schema["maximum"]); ok && f > m {
			bad("%v is above the maximum %v", f, m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("want boolean, got %T", v)
		}
	case "":
		bad("schema has no type")
	default:
		bad("unsupported type %q", typ)
	}
	if enum := asList(schema["enum"]); enum != nil && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		bad("%v is not one of %v", v, enum)
	}
	return errs
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// TestSchemaChecker pins down the checker itself, so a passing response
// check means something.
func TestSchemaChecker(t *testing.T) {
	s := loadSpec(t)
	sb := s.schemaRef("Sandbox")
	good := map[string]any{
		"id": "sb_1", "team_id": "t", "template": "base", "template_id": "x", "state": "running",
		"host": "h", "accel": "kvm", "metadata": map[string]any{"a": "b"}, "cpus": 1.0,
		"memory_mib": 512.0, "created_at": "2025-01-01T00:00:00Z", "expires_at": "2025-01-01T00:05:00Z",
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		schema  map[string]any
		value   any
		wantErr string
	}{
		{"valid sandbox", sb, good, ""},
		{"missing required", sb, with("id", nil), `missing required property "id"`},
		{"unknown property", sb, with("color", "red"), `unexpected property "color"`},
		{"wrong type", sb, with("cpus", "one"), "want integer"},
		{"non-integer", sb, with("cpus", 1.5), "want integer"},
		{"enum", sb, with("state", "sleeping"), "is not one of"},
		{"map values", sb, with("metadata", map[string]any{"a": 1.0}), "want string"},
		{"date-time", sb, with("created_at", "yesterday"), "not a date-time"},
		{"null not allowed", sb, with("host", "x"), ""},
		{"array items", s.schemaRef("SandboxList"), map[string]any{"sandboxes": []any{with("id", nil)}}, `missing required property "id"`},
		{"unsupported keyword", map[string]any{"type": "string", "oneOf": []any{}}, "x", "unsupported keyword"},
		{"minimum", map[string]any{"type": "integer", "minimum": 1}, 0.0, "below the minimum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := strings.Join(s.validate(tt.schema, tt.value, "$"), "; ")
			if tt.wantErr == "" && errs != "" {
				t.Fatalf("unexpected problems: %s", errs)
			}
			if tt.wantErr != "" && !strings.Contains(errs, tt.wantErr) {
				t.Fatalf("problems %q do not mention %q", errs, tt.wantErr)
			}
		})
	}
}
