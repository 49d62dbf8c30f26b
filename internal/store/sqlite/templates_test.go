package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack"
)

// A database from before templates were versioned in the store (one row per
// name in "templates") opens with each of those templates as version 1 of
// the public catalog, tagged latest, and its sandboxes with no captured
// defaults.
func TestTemplatesTableBecomesVersionOne(t *testing.T) {
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	before := 0
	for _, m := range ms {
		if strings.HasSuffix(m.name, "_teamtemplates.sql") {
			break
		}
		if _, err := db.Exec(m.sql); err != nil {
			t.Fatalf("apply %s: %v", m.name, err)
		}
		before = m.version
	}
	for _, q := range []string{
		fmt.Sprintf("PRAGMA user_version = %d", before),
		`INSERT INTO templates (name, id, cpus, memory_mib, disk_mib, accel, dir, built_at, build_ms)
			VALUES ('base', 'abc123', 1, 512, 2048, 'tcg', '', '2025-01-02T03:04:05.000000000Z', 99)`,
		`INSERT INTO sandboxes (id, team_id, template, template_id, state, host, accel, metadata, env, cpus, memory_mib,
			created_at, expires_at, end_reason) VALUES ('sbx_1', 'team_1', 'base', 'abc123', 'running', 'local', 'tcg',
			'{}', 'null', 1, 512, '2025-01-02T03:04:05.000000000Z', '2025-01-02T04:04:05.000000000Z', '')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetTemplate(t.Context(), "", "base")
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.ID != "abc123" || got.BuildMs != 99 || got.Accel != pandastack.AccelTCG || got.TeamID != "" {
		t.Errorf("migrated template = %+v", got)
	}
	vs, err := s.ListTemplateVersions(t.Context(), "", "base")
	if err != nil || len(vs) != 1 || len(vs[0].Tags) != 1 || vs[0].Tags[0] != "latest" {
		t.Errorf("migrated versions = %+v %v", vs, err)
	}
	sb, err := s.GetSandbox(t.Context(), "sbx_1")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Defaults != nil || sb.TemplateVersion != 0 {
		t.Errorf("an old sandbox record reads back defaults %+v, version %d; want none", sb.Defaults, sb.TemplateVersion)
	}
}

// A team's own template versions count toward its disk (RAM and root disk
// of each version); another team's and the public catalog's do not.
func TestTemplateDiskMiB(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	for _, tp := range []pandastack.Template{
		{TeamID: "team_a", Name: "web", ID: "tpl_1", MemoryMiB: 512, DiskMiB: 2048},
		{TeamID: "team_a", Name: "web", ID: "tpl_2", MemoryMiB: 1024, DiskMiB: 4096},
		{TeamID: "team_b", Name: "web", ID: "tpl_3", MemoryMiB: 512, DiskMiB: 2048},
		{TeamID: "", Name: "base", ID: "tpl_4", MemoryMiB: 512, DiskMiB: 2048},
	} {
		if _, err := s.AddTemplateVersion(ctx, tp, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for team, want := range map[string]int{"team_a": 512 + 2048 + 1024 + 4096, "team_b": 512 + 2048, "team_c": 0, "": 0} {
		if got, err := s.TemplateDiskMiB(ctx, team); err != nil || got != want {
			t.Errorf("TemplateDiskMiB(%q) = %d, %v; want %d", team, got, err, want)
		}
	}
}
