package sqlhttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/router"
)

func TestCommandTags(t *testing.T) {
	for tag, want := range map[string]struct {
		cmd string
		n   int64
		has bool
	}{
		"INSERT 0 5": {"INSERT", 5, true}, "SELECT 3": {"SELECT", 3, true}, "UPDATE 0": {"UPDATE", 0, true},
		"CREATE TABLE": {"CREATE", 0, false}, "BEGIN": {"BEGIN", 0, false},
	} {
		cmd, n := commandOf(tag)
		if cmd != want.cmd || (n != nil) != want.has || (n != nil && *n != want.n) {
			t.Errorf("%q: %q %v", tag, cmd, n)
		}
	}
}

func TestBatchHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("Neon-Batch-Isolation-Level", "RepeatableRead")
	h.Set("Neon-Batch-Read-Only", "true")
	h.Set("Neon-Batch-Deferrable", "yes") // only "true" counts
	if got, err := beginStatement(h); err != nil || got != "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" {
		t.Fatalf("%q %v", got, err)
	}
	h.Set("Neon-Batch-Isolation-Level", "Snapshot; DROP TABLE x")
	if _, err := beginStatement(h); err == nil {
		t.Fatal("an unknown isolation level was accepted")
	}
}

func TestParamsAreText(t *testing.T) {
	got := params([]any{"a", nil, 1.5, float64(2), true, map[string]any{"k": "v"}})
	want := []string{"a", "", "1.5", "2", "true", `{"k":"v"}`}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("param %d = %q, want %q", i, got[i], want[i])
		}
	}
	if got[1] != nil {
		t.Error("null is not NULL")
	}
}

// Requests that never reach a database answer as Neon does: JSON with a
// message and a 4xx status; the preflight allows the driver's headers.
func TestRefusals(t *testing.T) {
	h := New(Config{Table: router.NewTable(), Domain: "db.localhost"})
	for _, tc := range []struct {
		name, method, conn, body string
		status                   int
		want                     string
	}{
		{"no connection string", "POST", "", `{"query":"select 1"}`, 400, "Neon-Connection-String"},
		{"not a uri", "POST", "host=x", `{"query":"select 1"}`, 400, "postgres://"},
		{"another domain", "POST", "postgres://u:p@db-1.example.com/d", `{"query":"select 1"}`, 400, "not a database of this server"},
		{"unknown database", "POST", "postgres://u:p@db-1.db.localhost/d", `{"query":"select 1"}`, 400, "database db-1 does not exist"},
		{"no query", "POST", "postgres://u:p@db-1.db.localhost/d", `{}`, 400, "needs a query"},
		{"not json", "POST", "postgres://u:p@db-1.db.localhost/d", `select 1`, 400, "not JSON"},
		{"get", "GET", "postgres://u:p@db-1.db.localhost/d", ``, 405, "POST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/sql", strings.NewReader(tc.body))
			if tc.conn != "" {
				req.Header.Set("Neon-Connection-String", tc.conn)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			var body map[string]any
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != tc.status || !strings.Contains(body["message"].(string), tc.want) {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		})
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("OPTIONS", "/sql", nil))
	if w.Code != 200 || !strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Neon-Connection-String") ||
		w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("preflight %d %v", w.Code, w.Header())
	}
}
