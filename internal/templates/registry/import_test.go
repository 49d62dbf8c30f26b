package registry_test

import (
	"database/sql"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/store/sqlite"
	"github.com/pandastack/pandastack/internal/templates/registry"

	_ "modernc.org/sqlite"
)

// oldDataDir writes a data dir in the layout of before templates were in
// the store: the database has one row per template name, versions.json
// lists every version with its tags, and build runs are JSON files beside
// their logs.
func oldDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write := func(rel string, v any) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		data, ok := v.([]byte)
		if !ok {
			data, _ = json.Marshal(v)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	built := time.Date(2026, 11, 1, 2, 3, 4, 0, time.UTC)
	write("templates/web/versions.json", []pandastack.TemplateVersion{
		{Name: "web", Version: 1, ID: "w1", Tags: []string{"prod"}, CPUs: 1, MemoryMiB: 512, DiskMiB: 2048, BuildID: "bld_0000000000000001", BuiltAt: built},
		{Name: "web", Version: 2, ID: "w2", Tags: []string{"latest"}, CPUs: 1, MemoryMiB: 512, DiskMiB: 2048, BuildID: "bld_0000000000000002", BuiltAt: built.Add(time.Hour)},
	})
	write("templates/base/versions.json", []pandastack.TemplateVersion{
		{Name: "base", Version: 1, ID: "b1", Tags: []string{"latest"}, CPUs: 1, MemoryMiB: 512, DiskMiB: 2048, BuiltAt: built},
	})
	end := built.Add(time.Minute)
	write("builds/web/bld_0000000000000001.json", pandastack.TemplateBuild{ID: "bld_0000000000000001", Name: "web", Status: "succeeded",
		Version: 1, TemplateID: "w1", Steps: []pandastack.BuildStep{{Number: 1, Instruction: "bake"}}, StartedAt: built, EndedAt: &end})
	write("builds/web/bld_0000000000000001.log", []byte("build log one\n"))
	write("builds/web/bld_0000000000000003.json", pandastack.TemplateBuild{ID: "bld_0000000000000003", Name: "web", Status: "running",
		Steps: []pandastack.BuildStep{}, StartedAt: end})
	write("builds/web/bld_0000000000000003.log", []byte("cut short\n"))

	// The database of that release: every migration before this one, and
	// the current build of each template in its "templates" table.
	db, err := sql.Open("sqlite", filepath.Join(dir, "pandastack.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, f := range oldMigrations(t) {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	for _, q := range []string{
		"PRAGMA user_version = " + itoa(len(oldMigrations(t))),
		`INSERT INTO templates VALUES ('web', 'w2', 1, 512, 2048, 'tcg', '', '2026-11-01T03:03:04.000000000Z', 4321)`,
		`INSERT INTO templates VALUES ('base', 'b1', 1, 512, 2048, 'tcg', '', '2026-11-01T02:03:04.000000000Z', 999)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return dir
}

func itoa(n int) string { return strconv.Itoa(n) }

// oldMigrations are the store's migrations before the one that moved
// templates into it.
func oldMigrations(t *testing.T) []string {
	t.Helper()
	all, err := filepath.Glob("../../store/sqlite/migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if strings.HasSuffix(f, "_teamtemplates.sql") {
			break
		}
		out = append(out, f)
	}
	return out
}

// A data dir in the old layout keeps working: on the first start its
// versions, tags, build runs and logs are in the store (public, as
// everything was), once; the old files are not read again.
func TestImportOldLayout(t *testing.T) {
	dir := oldDataDir(t)
	ctx := t.Context()
	open := func() (*sqlite.Store, *registry.Registry) {
		st, err := sqlite.Open(ctx, filepath.Join(dir, "pandastack.db"))
		if err != nil {
			t.Fatal(err)
		}
		return st, registry.New(registry.Config{Store: st, Builder: &hostBuilder{}, LogDir: filepath.Join(dir, "builds")})
	}
	st, reg := open()
	if err := reg.Import(ctx, dir); err != nil {
		t.Fatal(err)
	}
	check := func(reg *registry.Registry) {
		t.Helper()
		vs, err := reg.Versions(ctx, "team_x", "web")
		if err != nil || len(vs) != 2 || vs[0].ID != "w1" || vs[1].ID != "w2" ||
			strings.Join(vs[0].Tags, ",") != "prod" || strings.Join(vs[1].Tags, ",") != "latest" || vs[0].BuildID != "bld_0000000000000001" {
			t.Fatalf("imported versions of web: %+v %v", vs, err)
		}
		for ref, want := range map[string]string{"web": "w2", "web:1": "w1", "web:prod": "w1", "base": "b1"} {
			if got, err := reg.Resolve(ctx, "team_x", ref); err != nil || got.ID != want {
				t.Errorf("after the import %s resolves to %+v %v, want %s", ref, got, err, want)
			}
		}
		ts, err := reg.List(ctx, "team_x")
		if err != nil || len(ts) != 2 || ts[1].Name != "web" || ts[1].BuildMs != 4321 || ts[1].Accel != pandastack.AccelTCG {
			t.Errorf("templates after the import: %+v %v", ts, err)
		}
		bs, err := reg.Builds(ctx, "team_x", "web")
		if err != nil || len(bs) != 2 || bs[0].Status != "failed" || bs[1].Status != "succeeded" || len(bs[1].Steps) != 1 {
			t.Fatalf("imported builds of web: %+v %v", bs, err)
		}
		rc, err := reg.BuildLog(ctx, "team_x", "web", "bld_0000000000000001")
		if err != nil {
			t.Fatal(err)
		}
		log, _ := io.ReadAll(rc)
		rc.Close()
		if string(log) != "build log one\n" {
			t.Errorf("imported log = %q", log)
		}
	}
	check(reg)
	for _, old := range []string{"templates/web/versions.json", "builds/web"} {
		if _, err := os.Stat(filepath.Join(dir, old)); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the import (err %v)", old, err)
		}
	}
	// A second start imports nothing again and loses nothing.
	st.Close()
	st, reg = open()
	defer st.Close()
	if err := reg.Import(ctx, dir); err != nil {
		t.Fatal(err)
	}
	check(reg)
}
