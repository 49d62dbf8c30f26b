package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// template is a build of a public-catalog template (TeamID "").
func template(name string) pandastack.Template {
	return pandastack.Template{
		Name:      name,
		ID:        "tpl_" + name + "_1",
		CPUs:      2,
		MemoryMiB: 1024,
		DiskMiB:   4096,
		Accel:     pandastack.AccelKVM,
		Dir:       "/var/lib/pandastack/templates/" + name,
		BuiltAt:   at(30),
		BuildMs:   12345,
	}
}

// build is another build of template name, numbered n.
func build(teamID, name string, n int) pandastack.Template {
	t := template(name)
	t.TeamID = teamID
	t.ID = "tpl_" + teamID + name + "_" + string(rune('0'+n))
	t.BuiltAt = at(30 + n)
	return t
}

// addVersion records t as its template's newest version and checks the
// number the store gave it.
func addVersion(t *testing.T, s pandastack.Store, tpl pandastack.Template, buildID, tag string) pandastack.Template {
	t.Helper()
	got, err := s.AddTemplateVersion(t.Context(), tpl, buildID, tag)
	mustNot(t, err, "add version of template "+tpl.Name)
	if got.Version < 1 {
		t.Fatalf("AddTemplateVersion(%s) returned version %d", tpl.Name, got.Version)
	}
	want := tpl
	want.Version = got.Version
	checkTemplate(t, got, want)
	return got
}

// versionTags maps each version number to its tags.
func versionTags(t *testing.T, s pandastack.Store, teamID, name string) map[int][]string {
	t.Helper()
	vs, err := s.ListTemplateVersions(t.Context(), teamID, name)
	mustNot(t, err, "list versions of "+name)
	out := map[int][]string{}
	for _, v := range vs {
		tags := slices.Clone(v.Tags)
		slices.Sort(tags)
		out[v.Version] = tags
	}
	return out
}

func (h *harness) templates(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := h.newStore(t)
		py := template("python")
		tcg := template("node")
		tcg.TeamID = "team_1"
		tcg.Accel, tcg.BuildMs, tcg.BuiltAt = pandastack.AccelTCG, 0, time.Time{}
		for _, tpl := range []pandastack.Template{py, tcg} {
			addVersion(t, s, tpl, "", "")
		}
		for _, want := range []pandastack.Template{py, tcg} {
			got, err := s.GetTemplate(t.Context(), want.TeamID, want.Name)
			mustNot(t, err, "get template "+want.Name)
			want.Version = 1
			checkTemplate(t, got, want)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		s := h.newStore(t)
		_, err := s.GetTemplate(t.Context(), "", "python")
		wantCode(t, err, pandastack.ENotFound, "GetTemplate on empty store")
		addVersion(t, s, template("python"), "", "")
		// The key is the name, not the build id.
		_, err = s.GetTemplate(t.Context(), "", "tpl_python_1")
		wantCode(t, err, pandastack.ENotFound, "GetTemplate(build id)")
		_, err = s.GetTemplate(t.Context(), "", "py")
		wantCode(t, err, pandastack.ENotFound, "GetTemplate(prefix)")
		vs, err := s.ListTemplateVersions(t.Context(), "", "nope")
		mustNot(t, err, "list versions of a missing template")
		if vs == nil || len(vs) != 0 {
			t.Errorf("ListTemplateVersions of a missing template = %#v, want an empty non-nil slice", vs)
		}
		wantCode(t, s.DeleteTemplate(t.Context(), "", "nope"), pandastack.ENotFound, "DeleteTemplate of a missing template")
	})

	t.Run("VersionsAreNumberedPerTemplate", func(t *testing.T) {
		s := h.newStore(t)
		v1 := addVersion(t, s, build("", "web", 1), "bld_a", "")
		same := addVersion(t, s, build("", "web", 1), "bld_b", "")
		v2 := addVersion(t, s, build("", "web", 2), "bld_c", "")
		other := addVersion(t, s, build("", "api", 1), "", "")
		if v1.Version != 1 || same.Version != 1 || v2.Version != 2 || other.Version != 1 {
			t.Errorf("versions = %d, %d (same build again), %d, %d (another template); want 1, 1, 2, 1",
				v1.Version, same.Version, v2.Version, other.Version)
		}
		vs, err := s.ListTemplateVersions(t.Context(), "", "web")
		mustNot(t, err, "list versions")
		if len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 || vs[0].BuildID != "bld_a" || vs[1].ID != v2.ID {
			t.Fatalf("versions of web = %+v", vs)
		}
		checkTime(t, "version BuiltAt", vs[1].BuiltAt, v2.BuiltAt)
		if vs[1].Name != "web" || vs[1].CPUs != v2.CPUs || vs[1].MemoryMiB != v2.MemoryMiB || vs[1].DiskMiB != v2.DiskMiB {
			t.Errorf("version 2 = %+v, want the fields of %+v", vs[1], v2)
		}
		// A rebuild back to version 1's build is a new version.
		if back := addVersion(t, s, build("", "web", 1), "", ""); back.Version != 3 {
			t.Errorf("rebuild to an older build made version %d, want 3", back.Version)
		}
		got, err := s.GetTemplate(t.Context(), "", "web")
		mustNot(t, err, "get template")
		if got.Version != 3 || got.ID != v1.ID {
			t.Errorf("newest of web = version %d build %s, want 3 %s", got.Version, got.ID, v1.ID)
		}
	})

	t.Run("TagsMove", func(t *testing.T) {
		s := h.newStore(t)
		addVersion(t, s, build("", "web", 1), "", "prod")
		addVersion(t, s, build("", "web", 2), "", "")
		want := map[int][]string{1: {"prod"}, 2: {"latest"}}
		if got := versionTags(t, s, "", "web"); !equalTags(got, want) {
			t.Errorf("tags = %v, want %v", got, want)
		}
		// Tagging the newest again moves prod; "latest" is never stored.
		addVersion(t, s, build("", "web", 2), "", "prod")
		addVersion(t, s, build("", "web", 2), "", "latest")
		want = map[int][]string{1: {}, 2: {"latest", "prod"}}
		if got := versionTags(t, s, "", "web"); !equalTags(got, want) {
			t.Errorf("tags after moving prod = %v, want %v", got, want)
		}
		addVersion(t, s, build("", "web", 3), "", "")
		want = map[int][]string{1: {}, 2: {"prod"}, 3: {"latest"}}
		if got := versionTags(t, s, "", "web"); !equalTags(got, want) {
			t.Errorf("tags after a new version = %v, want %v", got, want)
		}
	})

	t.Run("ExplicitVersionsImport", func(t *testing.T) {
		s := h.newStore(t)
		b1, b2 := build("", "web", 1), build("", "web", 2)
		b1.Version, b2.Version = 1, 2
		addVersion(t, s, b1, "bld_1", "")
		addVersion(t, s, b2, "bld_2", "")
		// The same build under its number again only tags it.
		addVersion(t, s, b1, "bld_1", "stable")
		if got := versionTags(t, s, "", "web"); !equalTags(got, map[int][]string{1: {"stable"}, 2: {"latest"}}) {
			t.Errorf("tags after an import = %v", got)
		}
		b3 := build("", "web", 3)
		b3.Version = 2
		_, err := s.AddTemplateVersion(t.Context(), b3, "", "")
		wantCode(t, err, pandastack.EConflict, "a version number taken by another build")
		if next := addVersion(t, s, build("", "web", 3), "", ""); next.Version != 3 {
			t.Errorf("after an import the next version is %d, want 3", next.Version)
		}
	})

	t.Run("TeamsHaveTheirOwnNames", func(t *testing.T) {
		s := h.newStore(t)
		pub := addVersion(t, s, build("", "web", 1), "", "prod")
		a := addVersion(t, s, build("team_a", "web", 1), "", "")
		addVersion(t, s, build("team_a", "web", 2), "", "")
		b := addVersion(t, s, build("team_b", "web", 1), "", "")
		addVersion(t, s, build("team_b", "cli", 1), "", "")
		if pub.Version != 1 || a.Version != 1 || b.Version != 1 {
			t.Errorf("first versions per team = %d %d %d, want 1 each", pub.Version, a.Version, b.Version)
		}
		for _, c := range []struct {
			team string
			want []string // name@version of the list
		}{
			{"", []string{"web@1"}},
			{"team_a", []string{"web@2"}},
			{"team_b", []string{"cli@1", "web@1"}},
			{"team_c", nil},
		} {
			all, err := s.ListTemplates(t.Context(), c.team)
			mustNot(t, err, "list templates of "+c.team)
			var got []string
			for _, tpl := range all {
				if tpl.TeamID != c.team {
					t.Errorf("ListTemplates(%q) returned a template of team %q", c.team, tpl.TeamID)
				}
				got = append(got, tpl.Name+"@"+string(rune('0'+tpl.Version)))
			}
			if all == nil || !slices.Equal(got, c.want) {
				t.Errorf("ListTemplates(%q) = %v, want %v", c.team, got, c.want)
			}
		}
		// Tags are per team too.
		if got := versionTags(t, s, "team_a", "web"); !equalTags(got, map[int][]string{1: {}, 2: {"latest"}}) {
			t.Errorf("team_a's tags = %v (public web has prod)", got)
		}
		// Deleting one team's template leaves the others'.
		mustNot(t, s.DeleteTemplate(t.Context(), "team_a", "web"), "delete team_a's web")
		_, err := s.GetTemplate(t.Context(), "team_a", "web")
		wantCode(t, err, pandastack.ENotFound, "deleted template")
		if vs := versionTags(t, s, "team_a", "web"); len(vs) != 0 {
			t.Errorf("versions left after delete: %v", vs)
		}
		for _, team := range []string{"", "team_b"} {
			if _, err := s.GetTemplate(t.Context(), team, "web"); err != nil {
				t.Errorf("web of team %q after team_a's was deleted: %v", team, err)
			}
		}
		// A new template of the deleted name starts again at 1.
		if again := addVersion(t, s, build("team_a", "web", 3), "", ""); again.Version != 1 {
			t.Errorf("re-created template starts at version %d", again.Version)
		}
	})

	t.Run("Builds", func(t *testing.T) {
		s := h.newStore(t)
		_, err := s.GetTemplateBuild(t.Context(), "bld_none")
		wantCode(t, err, pandastack.ENotFound, "GetTemplateBuild on empty store")
		running := pandastack.TemplateBuild{ID: "bld_1", TeamID: "team_a", Name: "web", Status: "running",
			Steps: []pandastack.BuildStep{}, StartedAt: at(1)}
		mustNot(t, s.PutTemplateBuild(t.Context(), running), "put build")
		got, err := s.GetTemplateBuild(t.Context(), "bld_1")
		mustNot(t, err, "get build")
		checkBuild(t, got, running)

		done := running
		done.Status, done.Version, done.TemplateID, done.EndedAt = "succeeded", 2, "tpl_x", ptr(at(9))
		done.Steps = []pandastack.BuildStep{{Number: 1, Line: 2, Instruction: "RUN make", Cached: true, DurationMs: 1.5},
			{Number: 2, Instruction: "bake", DurationMs: 900.25}}
		mustNot(t, s.PutTemplateBuild(t.Context(), done), "update build")
		got, err = s.GetTemplateBuild(t.Context(), "bld_1")
		mustNot(t, err, "get build")
		checkBuild(t, got, done)

		failed := pandastack.TemplateBuild{ID: "bld_2", TeamID: "team_a", Name: "web", Status: "failed",
			Error: &pandastack.Error{Code: pandastack.EInvalid, Message: "step 1/2 failed"}, Steps: []pandastack.BuildStep{},
			StartedAt: at(5), EndedAt: ptr(at(6))}
		other := pandastack.TemplateBuild{ID: "bld_3", TeamID: "team_b", Name: "web", Status: "running",
			Steps: []pandastack.BuildStep{}, StartedAt: at(7)}
		public := pandastack.TemplateBuild{ID: "bld_4", Name: "web", Status: "running", Steps: []pandastack.BuildStep{}, StartedAt: at(8)}
		for _, b := range []pandastack.TemplateBuild{failed, other, public} {
			mustNot(t, s.PutTemplateBuild(t.Context(), b), "put build "+b.ID)
		}
		list, err := s.ListTemplateBuilds(t.Context(), "team_a", "web")
		mustNot(t, err, "list builds")
		if len(list) != 2 {
			t.Fatalf("team_a's builds of web = %d, want 2 (newest first): %+v", len(list), list)
		}
		checkBuild(t, list[0], failed)
		checkBuild(t, list[1], done)
		for team, want := range map[string]string{"team_b": "bld_3", "": "bld_4"} {
			list, err := s.ListTemplateBuilds(t.Context(), team, "web")
			mustNot(t, err, "list builds")
			if len(list) != 1 || list[0].ID != want {
				t.Errorf("builds of web in team %q = %+v, want only %s", team, list, want)
			}
		}
		none, err := s.ListTemplateBuilds(t.Context(), "team_a", "api")
		mustNot(t, err, "list builds of a template with none")
		if none == nil || len(none) != 0 {
			t.Errorf("builds of a template with none = %#v, want an empty non-nil slice", none)
		}
		wantCode(t, s.PutTemplateBuild(t.Context(), pandastack.TemplateBuild{Name: "web", StartedAt: at(1)}),
			pandastack.EInvalid, "build with an empty id")
	})

	t.Run("ConcurrentBuildsGetDistinctVersions", func(t *testing.T) {
		s := h.newStore(t)
		const n = 8
		errs := make(chan error, n)
		versions := make(chan int, n)
		for i := range n {
			go func() {
				tpl := build("team_a", "web", 1)
				tpl.ID = tpl.ID + "_" + string(rune('a'+i))
				got, err := s.AddTemplateVersion(context.WithoutCancel(t.Context()), tpl, "", "")
				errs <- err
				versions <- got.Version
			}()
		}
		seen := map[int]bool{}
		for range n {
			mustNot(t, <-errs, "concurrent AddTemplateVersion")
			seen[<-versions] = true
		}
		for v := 1; v <= n; v++ {
			if !seen[v] {
				t.Errorf("versions after %d concurrent builds = %v, want 1..%d each once", n, seen, n)
				break
			}
		}
	})

	t.Run("EmptyKey", func(t *testing.T) {
		s := h.newStore(t)
		_, err := s.AddTemplateVersion(t.Context(), template(""), "", "")
		wantCode(t, err, pandastack.EInvalid, "empty template name")
		noID := template("python")
		noID.ID = ""
		_, err = s.AddTemplateVersion(t.Context(), noID, "", "")
		wantCode(t, err, pandastack.EInvalid, "empty build id")
	})
}

func equalTags(got, want map[int][]string) bool {
	if len(got) != len(want) {
		return false
	}
	for v, tags := range want {
		if !slices.Equal(got[v], tags) && !(len(got[v]) == 0 && len(tags) == 0) {
			return false
		}
	}
	return true
}

func checkBuild(t *testing.T, got, want pandastack.TemplateBuild) {
	t.Helper()
	checkEqual(t, "build "+want.ID, got, want, func(t *testing.T, g, w *pandastack.TemplateBuild) {
		t.Helper()
		checkTime(t, "build StartedAt", g.StartedAt, w.StartedAt)
		checkOptTime(t, "build EndedAt", g.EndedAt, w.EndedAt)
		g.StartedAt, w.StartedAt = time.Time{}, time.Time{}
		g.EndedAt, w.EndedAt = nil, nil
	})
}
