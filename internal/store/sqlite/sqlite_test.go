package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, path string) pandastack.Store {
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return s
	})
}

func openTemp(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pandastack.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func pragma(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var v string
	if err := db.QueryRowContext(t.Context(), "PRAGMA "+name).Scan(&v); err != nil {
		t.Fatalf("PRAGMA %s: %v", name, err)
	}
	return v
}

func TestPragmas(t *testing.T) {
	s, _ := openTemp(t)
	for _, c := range []struct {
		db         *sql.DB
		role, name string
		want       string
	}{
		{s.w, "writer", "journal_mode", "wal"},
		{s.w, "writer", "busy_timeout", "5000"},
		{s.w, "writer", "foreign_keys", "1"},
		{s.w, "writer", "synchronous", "1"}, // NORMAL
		{s.w, "writer", "query_only", "0"},
		{s.r, "reader", "journal_mode", "wal"},
		{s.r, "reader", "busy_timeout", "5000"},
		{s.r, "reader", "foreign_keys", "1"},
		{s.r, "reader", "query_only", "1"},
	} {
		if got := pragma(t, c.db, c.name); got != c.want {
			t.Errorf("%s PRAGMA %s = %s, want %s", c.role, c.name, got, c.want)
		}
	}
	if got := s.w.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer MaxOpenConnections = %d, want 1", got)
	}
}

func TestReaderCannotWrite(t *testing.T) {
	s, _ := openTemp(t)
	_, err := s.r.ExecContext(t.Context(), `INSERT INTO teams (id, name, created_at) VALUES ('a', 'b', 'c')`)
	if err == nil {
		t.Fatal("insert through the read pool succeeded")
	}
}

func TestMigrations(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}

	s, path := openTemp(t)
	if got, want := pragma(t, s.w, "user_version"), ms[len(ms)-1].version; got != strconv.Itoa(want) {
		t.Errorf("user_version = %s, want %d", got, want)
	}
	ctx := t.Context()
	if err := s.CreateTeam(ctx, pandastack.Team{ID: "team_1", Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening an up-to-date database applies nothing and keeps the data.
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if _, err := s2.GetTeam(ctx, "team_1"); err != nil {
		t.Errorf("team lost on reopen: %v", err)
	}
	// A database from a newer build is refused rather than misread.
	if _, err := s2.w.ExecContext(ctx, "PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if s3, err := Open(ctx, path); err == nil {
		s3.Close()
		t.Fatal("Open accepted a database with a newer schema version")
	} else if !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open error = %v, want one about a newer schema", err)
	}
}

func TestMigrationFailureRollsBack(t *testing.T) {
	// A database that already has a "templates" table but no schema version
	// makes the first migration fail after it created "teams"; the rollback
	// must leave neither that table nor a version behind.
	path := filepath.Join(t.TempDir(), "clash.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE templates (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	if s, err := Open(t.Context(), path); err == nil {
		s.Close()
		t.Fatal("Open succeeded over a clashing schema")
	}
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'teams'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if n != 0 || v != 0 {
		t.Errorf("failed migration left teams table=%d user_version=%d, want 0 and 0", n, v)
	}
}

func TestNanosecondTimes(t *testing.T) {
	// SQLite keeps full nanosecond precision (the shared suite only asks for
	// microseconds), and ordering holds at that precision.
	s, _ := openTemp(t)
	ctx := t.Context()
	zone := time.FixedZone("UTC-7", -7*60*60)
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 123456789, zone)
	a := pandastack.Sandbox{ID: "sbx_a", TeamID: "team", State: pandastack.StateRunning,
		CreatedAt: t0.Add(1), ExpiresAt: t0, EndedAt: &t0}
	b := pandastack.Sandbox{ID: "sbx_b", TeamID: "team", State: pandastack.StateRunning, CreatedAt: t0}
	for _, sb := range []pandastack.Sandbox{a, b} {
		if err := s.PutSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetSandbox(ctx, "sbx_a")
	if err != nil {
		t.Fatal(err)
	}
	if got.CreatedAt != t0.Add(1).UTC() || got.ExpiresAt != t0.UTC() || *got.EndedAt != t0.UTC() {
		t.Errorf("times = %v %v %v, want %v %v %v", got.CreatedAt, got.ExpiresAt, *got.EndedAt,
			t0.Add(1).UTC(), t0.UTC(), t0.UTC())
	}
	list, err := s.ListSandboxes(ctx, pandastack.SandboxFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "sbx_b" || list[1].ID != "sbx_a" {
		t.Errorf("order = %v, want sbx_b then sbx_a (1ns apart)", list)
	}
}

func TestTimeOutOfRange(t *testing.T) {
	s, _ := openTemp(t)
	sb := pandastack.Sandbox{ID: "sbx_far", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	err := s.PutSandbox(t.Context(), sb)
	if code := pandastack.ErrorCode(err); code != pandastack.EInvalid {
		t.Errorf("PutSandbox(year 10000) = %v (code %s), want code %s", err, code, pandastack.EInvalid)
	}
}

func TestErrorMessages(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	_, err := s.GetSandbox(ctx, "sbx_x")
	if pe, ok := err.(*pandastack.Error); !ok || pe.Message != "sandbox sbx_x not found" {
		t.Errorf("GetSandbox(missing) = %#v, want *pandastack.Error \"sandbox sbx_x not found\"", err)
	}
	if err := s.CreateTeam(ctx, pandastack.Team{ID: "team_1", Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	err = s.CreateTeam(ctx, pandastack.Team{ID: "team_2", Name: "acme"})
	if got := pandastack.ErrorMessage(err); got != `team name "acme" is taken` {
		t.Errorf("duplicate name message = %q", got)
	}
	err = s.CreateTeam(ctx, pandastack.Team{ID: "team_1", Name: "other"})
	if got := pandastack.ErrorMessage(err); got != "team team_1 already exists" {
		t.Errorf("duplicate id message = %q", got)
	}
}

func TestMemory(t *testing.T) {
	s, err := Open(t.Context(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddTemplateVersion(t.Context(), pandastack.Template{Name: "python", ID: "tpl_1"}, "", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTemplate(t.Context(), "", "python"); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		"",
		filepath.Join(dir, "db?mode=ro"),
		filepath.Join(dir, "missing-dir", "x.db"),
	} {
		if s, err := Open(t.Context(), path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
	// A file that is not a database.
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(t.Context(), junk); err == nil {
		s.Close()
		t.Errorf("Open(junk file) succeeded")
	}
	// A canceled context.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if s, err := Open(ctx, filepath.Join(dir, "c.db")); err == nil {
		s.Close()
		t.Errorf("Open with canceled context succeeded")
	}
}

func TestCloseTwice(t *testing.T) {
	s, _ := openTemp(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}
