package templates

import (
	"slices"
	"testing"

	"github.com/pandastack/pandastack"
)

func TestParseRef(t *testing.T) {
	for ref, want := range map[string][3]string{
		"web": {"web", "", ""}, "web:v2": {"web", "v2", ""}, "web:3": {"web", "3", ""}, "web@abc": {"web", "", "abc"},
	} {
		n, tag, id := ParseRef(ref)
		if [3]string{n, tag, id} != want {
			t.Errorf("ParseRef(%q) = %q %q %q, want %q", ref, n, tag, id, want)
		}
	}
}

func TestRecordVersion(t *testing.T) {
	b := &Builder{cfg: Config{DataDir: t.TempDir()}}
	rec := func(id, tag string) int {
		n, err := b.recordVersion(pandastack.Template{Name: "web", ID: id}, tag, "")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if rec("a", "") != 1 || rec("a", "") != 1 {
		t.Fatal("a rebuild with the same result must not make a new version")
	}
	if rec("b", "prod") != 2 || rec("c", "") != 3 || rec("c", "prod") != 3 {
		t.Fatal("versions are numbered in build order")
	}
	vs, err := b.readVersions("web")
	if err != nil || len(vs) != 3 {
		t.Fatalf("%v %v", vs, err)
	}
	if len(vs[0].Tags) != 0 || len(vs[1].Tags) != 0 || !slices.Equal(vs[2].Tags, []string{LatestTag, "prod"}) {
		t.Fatalf("tags move to the newest version that carries them: %+v", vs)
	}
}

func TestInterruptedBuildIsReportedFailed(t *testing.T) {
	b := &Builder{cfg: Config{DataDir: t.TempDir()}}
	r, err := b.startRun("web")
	if err != nil {
		t.Fatal(err)
	}
	b.running = map[string]bool{r.rec.ID: true}
	if br, err := b.Build1(t.Context(), "web", r.rec.ID); err != nil || br.Status != "running" {
		t.Fatalf("live build: %+v %v", br, err)
	}
	// The server stops: a new Builder does not know the build.
	b2 := &Builder{cfg: b.cfg}
	br, err := b2.Build1(t.Context(), "web", r.rec.ID)
	if err != nil || br.Status != "failed" || br.Error == nil || br.Error.Code != pandastack.EUnavailable {
		t.Fatalf("interrupted build: %+v %v", br, err)
	}
	if _, err := b2.Build1(t.Context(), "web", "../../etc/passwd"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Fatalf("bad build id: %v", err)
	}
}

func TestResolveTagsAndVersions(t *testing.T) {
	b := &Builder{cfg: Config{DataDir: t.TempDir()}}
	for _, v := range []struct{ id, tag string }{{"aaa", "v1.0"}, {"bbb", ""}, {"ccc", "prod"}} {
		if _, err := b.recordVersion(pandastack.Template{Name: "web", ID: v.id}, v.tag, ""); err != nil {
			t.Fatal(err)
		}
	}
	for ref, want := range map[string]string{"web:v1.0": "aaa", "web:2": "bbb", "web:v2": "bbb", "web:prod": "ccc", "web:3": "ccc"} {
		_, id, _, err := b.resolve(t.Context(), ref)
		if err != nil || id != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", ref, id, err, want)
		}
	}
	for ref, code := range map[string]string{"web:nope": pandastack.ENotFound, "web:9": pandastack.ENotFound,
		"../x": pandastack.EInvalid, "web@../../etc": pandastack.EInvalid, "a/b:1": pandastack.EInvalid, ".hidden": pandastack.EInvalid} {
		if _, _, _, err := b.resolve(t.Context(), ref); pandastack.ErrorCode(err) != code {
			t.Errorf("resolve(%q): %v, want %s", ref, err, code)
		}
	}
}
