package templates

import (
	"context"
	"os"
	"testing"

	"github.com/pandastack/pandastack"
)

// publicRefs resolves every reference to build "b2" of web, version 2.
type publicRefs struct{ team string }

func (p *publicRefs) Resolve(_ context.Context, teamID, ref string) (pandastack.Template, error) {
	p.team = teamID
	return pandastack.Template{Name: "web", ID: "b2", Version: 2}, nil
}

// An exact reference is a build directory on this host and nothing else;
// any other reference goes to the registry, in the public catalog.
func TestRefs(t *testing.T) {
	b := &Builder{cfg: Config{TemplateDir: t.TempDir()}}
	for _, id := range []string{"b1", "b2"} {
		dir := b.dir("web", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeRecord(dir, record{Template: pandastack.Template{Name: "web", ID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeMeta(b.dir("web", "b1"), meta{Env: map[string]string{"A": "1"}, Workdir: "/srv", User: "app"}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, tpl, err := b.Snapshot(ctx, "web@b1")
	if err != nil || tpl.ID != "b1" || tpl.Version != 0 || tpl.Defaults.Workdir != "/srv" || tpl.Defaults.User != "app" || tpl.Defaults.Env["A"] != "1" {
		t.Errorf("web@b1: %+v %v", tpl, err)
	}
	for ref, code := range map[string]string{"web@nope": pandastack.ENotFound, "web@../../etc": pandastack.EInvalid,
		"../x@b1": pandastack.EInvalid, "web@.b1": pandastack.EInvalid, "web": pandastack.ENotFound} {
		if _, _, err := b.Snapshot(ctx, ref); pandastack.ErrorCode(err) != code {
			t.Errorf("Snapshot(%q): %v, want %s", ref, err, code)
		}
	}
	refs := &publicRefs{team: "unset"}
	b.UseRefs(refs)
	_, tpl, err = b.Snapshot(ctx, "web:prod")
	if err != nil || tpl.ID != "b2" || tpl.Version != 2 || refs.team != "" {
		t.Errorf("web:prod through the registry: %+v %v (asked for team %q, want the public catalog)", tpl, err, refs.team)
	}
	if n := b.DiskMiB(ctx, "web", "../../x"); n != 0 {
		t.Errorf("DiskMiB of a path outside: %d", n)
	}
}
