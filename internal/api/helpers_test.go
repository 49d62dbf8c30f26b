package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
)

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// req describes a request for call.
type req struct {
	method string
	path   string
	key    string            // API key; "" sends none
	body   any               // JSON-encoded unless []byte or io.Reader
	header map[string]string // extra headers
}

// call performs a request against the fake-backed server and checks the
// response against the OpenAPI spec: JSON bodies against the documented
// schema, NDJSON streams line by line, undocumented success statuses fail.
func call(t *testing.T, env *apitest.Env, r req) response {
	t.Helper()
	return callCtx(t, context.Background(), env, r)
}

func callCtx(t *testing.T, ctx context.Context, env *apitest.Env, r req) response {
	t.Helper()
	resp := send(t, ctx, env, r)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", r.method, r.path, err)
	}
	out := response{Status: resp.StatusCode, Header: resp.Header, Body: body}
	checkAgainstSpec(t, r.method, r.path, out)
	return out
}

// send performs a request and returns the open response.
func send(t *testing.T, ctx context.Context, env *apitest.Env, r req) *http.Response {
	t.Helper()
	var body io.Reader
	switch b := r.body.(type) {
	case nil:
	case []byte:
		body = bytes.NewReader(b)
	case io.Reader:
		body = b
	case string:
		body = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	hr, err := http.NewRequestWithContext(ctx, r.method, env.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	return resp
}

func checkAgainstSpec(t *testing.T, method, path string, r response) {
	t.Helper()
	s := loadSpec(t)
	p, _, _ := strings.Cut(path, "?")
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	schema, err := s.responseSchema(method, p, r.Status, ct)
	if err != nil {
		t.Fatalf("%s %s -> %d: %v", method, path, r.Status, err)
	}
	if schema == nil {
		return
	}
	check := func(line []byte) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("%s %s -> %d: body is not JSON: %v: %q", method, path, r.Status, err, line)
		}
		if errs := s.validate(schema, v, "$"); len(errs) > 0 {
			t.Fatalf("%s %s -> %d: response does not match the spec:\n  %s\nbody: %s",
				method, path, r.Status, strings.Join(errs, "\n  "), line)
		}
	}
	switch ct {
	case "application/json":
		check(r.Body)
	case "application/x-ndjson":
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			check(sc.Bytes())
		}
	}
}

// decode unmarshals a JSON body.
func decode[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, r.Body, err)
	}
	return v
}

type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wantError checks that r is the given error status and code, and that the
// message contains msg.
func wantError(t *testing.T, r response, status int, code, msg string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
	e := decode[apiError](t, r)
	if e.Error.Code != code || !strings.Contains(e.Error.Message, msg) {
		t.Fatalf("error %s %q, want %s containing %q", e.Error.Code, e.Error.Message, code, msg)
	}
}

func wantStatus(t *testing.T, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d; body %s", r.Status, status, r.Body)
	}
}

// sandbox is the part of the Sandbox JSON tests look at.
type sandbox struct {
	ID        string            `json:"id"`
	TeamID    string            `json:"team_id"`
	Template  string            `json:"template"`
	State     string            `json:"state"`
	Metadata  map[string]string `json:"metadata"`
	CreatedAt string            `json:"created_at"`
	ExpiresAt string            `json:"expires_at"`
	EndedAt   string            `json:"ended_at"`
	Lifetime  string            `json:"lifetime"`
}

// newSandbox creates a sandbox of template base for key.
func newSandbox(t *testing.T, env *apitest.Env, key string, body map[string]any) sandbox {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["template"]; !ok {
		body["template"] = "base"
	}
	r := call(t, env, req{method: "POST", path: "/v1/sandboxes", key: key, body: body})
	wantStatus(t, r, http.StatusCreated)
	return decode[sandbox](t, r)
}

// event is one NDJSON line of an exec stream.
type event struct {
	Type   string `json:"type"`
	PID    int    `json:"pid"`
	Data   []byte `json:"data"`
	Result *struct {
		ExitCode   int     `json:"exit_code"`
		Signal     string  `json:"signal"`
		TimedOut   bool    `json:"timed_out"`
		DurationMs float64 `json:"duration_ms"`
	} `json:"result"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func events(t *testing.T, r response) []event {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("Content-Type %q, want application/x-ndjson; body %s", ct, r.Body)
	}
	var out []event
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	for dec.More() {
		var ev event
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("decode event: %v", err)
		}
		out = append(out, ev)
	}
	return out
}
