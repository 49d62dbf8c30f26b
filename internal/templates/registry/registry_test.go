package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/store/sqlite"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// hostBuilder stands in for the host half: a custom build "runs" the spec
// it is given in the request (no tar needed), resolving FROM through the
// registry's rule, and yields a build whose ID is its team, name and spec.
type hostBuilder struct {
	// block, when set, holds every custom build until it is closed.
	block chan struct{}
	// output is printed by every custom build after it started.
	output string
}

func (h *hostBuilder) Build(_ context.Context, name string, log io.Writer) (pandastack.Template, error) {
	fmt.Fprintln(log, "baking", name)
	return pandastack.Template{Name: name, ID: "cat-" + name, CPUs: 1, MemoryMiB: 512, DiskMiB: 2048,
		Accel: pandastack.AccelTCG, BuiltAt: time.Now().UTC()}, nil
}

func (h *hostBuilder) BuildFromTar(ctx context.Context, req pandastack.CustomBuild, _ io.Reader, log io.Writer) (pandastack.Template, error) {
	from, _, _ := strings.Cut(strings.TrimPrefix(string(req.Spec), "FROM "), "\n")
	parent, err := req.ResolveFrom(ctx, from)
	if err != nil {
		return pandastack.Template{}, pandastack.Errorf(pandastack.ErrorCode(err), "spec line 1: FROM %s: %v", from, err)
	}
	runLog, err := req.Run.Start(ctx)
	if err != nil {
		return pandastack.Template{}, err
	}
	out := io.MultiWriter(log, runLog)
	fmt.Fprintf(out, "FROM %s\n%s", parent, h.output)
	if h.block != nil {
		select {
		case <-h.block:
		case <-ctx.Done():
			return pandastack.Template{}, ctx.Err()
		}
	}
	req.Run.Step(pandastack.BuildStep{Number: 1, Instruction: "bake"})
	if strings.Contains(string(req.Spec), "fail") {
		return pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "step 1/1 failed")
	}
	return pandastack.Template{Name: req.Name, ID: fmt.Sprintf("%x", sha256.Sum256([]byte(req.TeamID+"/"+req.Name+"/"+string(req.Spec))))[:24],
		CPUs: 1, MemoryMiB: 512, DiskMiB: 2048, Accel: pandastack.AccelTCG, BuiltAt: time.Now().UTC()}, nil
}

type env struct {
	reg    *registry.Registry
	store  *sqlite.Store
	host   *hostBuilder
	logDir string
}

func newEnv(t *testing.T, configure ...func(*registry.Config)) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{store: st, host: &hostBuilder{}, logDir: filepath.Join(t.TempDir(), "builds")}
	cfg := registry.Config{Store: st, Builder: e.host, LogDir: e.logDir, Catalog: []string{"base", "minimal"}}
	for _, f := range configure {
		f(&cfg)
	}
	e.reg = registry.New(cfg)
	if _, err := e.reg.BuildCatalog(t.Context(), "base", io.Discard); err != nil {
		t.Fatal(err)
	}
	return e
}

// build builds a custom template as team (capped like a non-admin key).
func (e *env) build(t *testing.T, team, name, spec, tag string) (pandastack.TemplateBuild, pandastack.Template, error) {
	t.Helper()
	return e.reg.BuildCustom(t.Context(), registry.CustomRequest{Capped: team != "",
		CustomBuild: pandastack.CustomBuild{TeamID: team, Name: name, Tag: tag, Spec: []byte(spec)}}, nil, io.Discard)
}

func (e *env) mustBuild(t *testing.T, team, name, spec, tag string) pandastack.Template {
	t.Helper()
	_, tpl, err := e.build(t, team, name, spec, tag)
	if err != nil {
		t.Fatalf("build %s of team %q: %v", name, team, err)
	}
	return tpl
}

func wantCode(t *testing.T, err error, code string, what string) {
	t.Helper()
	if got := pandastack.ErrorCode(err); err == nil || got != code {
		t.Errorf("%s: err %v (code %q), want code %s", what, err, got, code)
	}
}

// Two teams can both have "web": each resolves, lists and versions only its
// own; another team's name answers exactly like a missing one.
func TestTeamsHaveTheirOwnTemplates(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	a1 := e.mustBuild(t, "team_a", "web", "FROM base\nRUN a1", "")
	a2 := e.mustBuild(t, "team_a", "web", "FROM base\nRUN a2", "prod")
	b1 := e.mustBuild(t, "team_b", "web", "FROM base\nRUN b1", "")
	if a1.Version != 1 || a2.Version != 2 || b1.Version != 1 || a1.TeamID != "team_a" || b1.TeamID != "team_b" {
		t.Fatalf("versions: a %d %d, b %d (teams %q %q)", a1.Version, a2.Version, b1.Version, a1.TeamID, b1.TeamID)
	}
	for _, c := range []struct {
		team, ref string
		want      pandastack.Template
	}{
		{"team_a", "web", a2},
		{"team_a", "web:latest", a2},
		{"team_a", "web:1", a1},
		{"team_a", "web:v1", a1},
		{"team_a", "web:prod", a2},
		{"team_a", "web@" + a1.ID, a1},
		{"team_b", "web", b1},
		{"team_b", "web:1", b1},
	} {
		got, err := e.reg.Resolve(ctx, c.team, c.ref)
		if err != nil {
			t.Errorf("%s resolves %s: %v", c.team, c.ref, err)
			continue
		}
		if got.ID != c.want.ID || got.Version != c.want.Version || got.TeamID != c.want.TeamID || got.Name != "web" {
			t.Errorf("%s resolves %s to %+v, want build %s version %d", c.team, c.ref, got, c.want.ID, c.want.Version)
		}
	}
	// Another team's build, tag or version: not there.
	_, err := e.reg.Resolve(ctx, "team_b", "web@"+a1.ID)
	wantCode(t, err, pandastack.ENotFound, "team_b naming team_a's build")
	_, err = e.reg.Resolve(ctx, "team_b", "web:prod")
	wantCode(t, err, pandastack.ENotFound, "team_b naming team_a's tag")
	_, err = e.reg.Resolve(ctx, "team_b", "web:2")
	wantCode(t, err, pandastack.ENotFound, "team_b naming team_a's version 2")
	// A team with no web: the same answer as a name nobody has.
	_, missing := e.reg.Resolve(ctx, "team_c", "nothing")
	_, other := e.reg.Resolve(ctx, "team_c", "web")
	wantCode(t, other, pandastack.ENotFound, "team_c naming web")
	if strings.ReplaceAll(pandastack.ErrorMessage(other), "web", "X") != strings.ReplaceAll(pandastack.ErrorMessage(missing), "nothing", "X") {
		t.Errorf("another team's template answers %q, a missing one %q", pandastack.ErrorMessage(other), pandastack.ErrorMessage(missing))
	}
	_, err = e.reg.Versions(ctx, "team_c", "web")
	wantCode(t, err, pandastack.ENotFound, "versions of another team's template")
	_, err = e.reg.Resolve(ctx, "team_a", "../etc")
	wantCode(t, err, pandastack.EInvalid, "a reference with path characters")

	// Lists: own plus public, never another team's.
	for team, want := range map[string]string{"team_a": "base,web@team_a", "team_b": "base,web@team_b", "team_c": "base", "": "base"} {
		ts, err := e.reg.List(ctx, team)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tp := range ts {
			got = append(got, tp.Name+map[bool]string{true: "@" + tp.TeamID}[tp.TeamID != ""])
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%q lists %v, want %s", team, got, want)
		}
	}
	vs, err := e.reg.Versions(ctx, "team_a", "web")
	if err != nil || len(vs) != 2 || strings.Join(vs[1].Tags, ",") != "latest,prod" {
		t.Errorf("team_a's versions of web: %+v %v", vs, err)
	}
	// Every team resolves the public catalog.
	for _, team := range []string{"team_a", "team_c", ""} {
		if got, err := e.reg.Resolve(ctx, team, "base"); err != nil || got.TeamID != "" || got.ID != "cat-base" {
			t.Errorf("%q resolves base: %+v %v", team, got, err)
		}
	}
}

// A team's FROM resolves like its creates: its own templates, then public.
func TestFromResolvesWithinTheTeam(t *testing.T) {
	e := newEnv(t)
	e.mustBuild(t, "team_a", "app", "FROM base\nRUN a", "")
	if _, _, err := e.build(t, "team_a", "app2", "FROM app", ""); err != nil {
		t.Errorf("team_a building on its own app: %v", err)
	}
	_, _, err := e.build(t, "team_b", "mine", "FROM app", "")
	wantCode(t, err, pandastack.ENotFound, "team_b building on team_a's app")
	if bs, _ := e.reg.Builds(t.Context(), "team_b", "mine"); len(bs) != 0 {
		t.Errorf("a build refused before it began left runs: %+v", bs)
	}
}

// Public names are reserved: a team cannot take the catalog's names (even
// unbuilt) or a public custom template's; the admin cannot name a custom
// template after a catalog one.
func TestPublicNamesAreReserved(t *testing.T) {
	e := newEnv(t)
	e.mustBuild(t, "", "shared", "FROM base\nRUN s", "")
	for _, name := range []string{"base", "minimal", "shared"} {
		_, _, err := e.build(t, "team_a", name, "FROM base\nRUN x", "")
		wantCode(t, err, pandastack.EConflict, "team_a building "+name)
	}
	_, _, err := e.build(t, "", "minimal", "FROM base\nRUN x", "")
	wantCode(t, err, pandastack.EConflict, "a public custom template named like a catalog one")
	// A public template made after a team's of the same name: the team
	// keeps resolving its own.
	own := e.mustBuild(t, "team_b", "later", "FROM base\nRUN b", "")
	e.mustBuild(t, "", "later", "FROM base\nRUN public", "")
	if got, err := e.reg.Resolve(t.Context(), "team_b", "later"); err != nil || got.ID != own.ID {
		t.Errorf("team_b resolves later to %+v %v, want its own", got, err)
	}
}

// A team runs at most MaxBuildsPerTeam custom builds at once; other teams
// and the admin are not held back by it.
func TestBuildsPerTeamAreCapped(t *testing.T) {
	e := newEnv(t, func(c *registry.Config) { c.MaxBuildsPerTeam = 1 })
	e.host.block = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := e.build(t, "team_a", "slow", "FROM base\nRUN slow", "")
		done <- err
	}()
	waitFor(t, "the first build to run", func() bool {
		bs, _ := e.reg.Builds(t.Context(), "team_a", "slow")
		return len(bs) == 1 && bs[0].Status == "running"
	})
	_, _, err := e.build(t, "team_a", "second", "FROM base\nRUN 2", "")
	wantCode(t, err, pandastack.EQuota, "a second build of the same team")
	if !strings.Contains(pandastack.ErrorMessage(err), "limit 1") {
		t.Errorf("quota error %q does not name the limit", pandastack.ErrorMessage(err))
	}
	others := make(chan error, 2)
	go func() { _, _, err := e.build(t, "team_b", "other", "FROM base\nRUN b", ""); others <- err }()
	go func() { _, _, err := e.build(t, "", "admin", "FROM base\nRUN adm", ""); others <- err }()
	waitFor(t, "the other team's and the admin's builds to run", func() bool {
		b, _ := e.reg.Builds(t.Context(), "team_b", "other")
		p, _ := e.reg.Builds(t.Context(), "", "admin")
		return len(b) == 1 && len(p) == 1
	})
	close(e.host.block)
	for _, c := range []chan error{done, others, others} {
		if err := <-c; err != nil {
			t.Errorf("build: %v", err)
		}
	}
	if _, _, err := e.build(t, "team_a", "second", "FROM base\nRUN 2", ""); err != nil {
		t.Errorf("a build after the first ended: %v", err)
	}
}

// Build runs and logs: a team sees its own and public ones; another team's
// build id answers like a missing one; a failed build is kept with its
// error and log; a run the server lost is reported interrupted.
func TestBuildRunsAndLogs(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.host.output = "compiling\n"
	ok, tpl, err := e.build(t, "team_a", "web", "FROM base\nRUN ok", "")
	if err != nil || ok.Status != "succeeded" || ok.Version != 1 || ok.TemplateID != tpl.ID || len(ok.Steps) != 1 {
		t.Fatalf("build: %+v %v", ok, err)
	}
	failed, _, err := e.build(t, "team_a", "web", "FROM base\nRUN fail", "")
	if err == nil || failed.Status != "failed" || failed.Error == nil || failed.Error.Message != "step 1/1 failed" {
		t.Fatalf("failing build: %+v %v", failed, err)
	}
	bs, err := e.reg.Builds(ctx, "team_a", "web")
	if err != nil || len(bs) != 2 || bs[0].ID != failed.ID || bs[1].ID != ok.ID {
		t.Fatalf("team_a's builds: %+v %v", bs, err)
	}
	rc, err := e.reg.BuildLog(ctx, "team_a", "web", failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(log), "compiling") || !strings.Contains(string(log), "build failed: step 1/1 failed") {
		t.Errorf("kept log of the failed build:\n%s", log)
	}
	// team_b: nothing of team_a's, in every form.
	if bs, _ := e.reg.Builds(ctx, "team_b", "web"); len(bs) != 0 {
		t.Errorf("team_b lists team_a's builds: %+v", bs)
	}
	_, err = e.reg.Build(ctx, "team_b", "web", ok.ID)
	wantCode(t, err, pandastack.ENotFound, "team_b reading team_a's build")
	_, missing := e.reg.Build(ctx, "team_b", "web", "bld_0000000000000000")
	if pandastack.ErrorMessage(err) != strings.ReplaceAll(pandastack.ErrorMessage(missing), "bld_0000000000000000", ok.ID) {
		t.Errorf("another team's build answers %q, a missing one %q", pandastack.ErrorMessage(err), pandastack.ErrorMessage(missing))
	}
	_, err = e.reg.BuildLog(ctx, "team_b", "web", ok.ID)
	wantCode(t, err, pandastack.ENotFound, "team_b reading team_a's build log")
	_, err = e.reg.Build(ctx, "team_a", "other", ok.ID)
	wantCode(t, err, pandastack.ENotFound, "a build under another template's name")
	// Public builds are visible to every team.
	pub, _, err := e.build(t, "", "shared", "FROM base\nRUN s", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.reg.Build(ctx, "team_b", "shared", pub.ID); err != nil {
		t.Errorf("team_b reading a public build: %v", err)
	}
	// A run left "running" by a server that stopped is reported as failed.
	lost := pandastack.TemplateBuild{ID: "bld_00000000000000ff", TeamID: "team_a", Name: "web", Status: "running",
		Steps: []pandastack.BuildStep{}, StartedAt: time.Now().UTC()}
	if err := e.store.PutTemplateBuild(ctx, lost); err != nil {
		t.Fatal(err)
	}
	got, err := e.reg.Build(ctx, "team_a", "web", lost.ID)
	if err != nil || got.Status != "failed" || !strings.Contains(got.Error.Message, "interrupted") {
		t.Errorf("a lost run reads %+v %v", got, err)
	}
}

// The kept log is capped; the build itself goes on and its end is logged.
func TestBuildLogIsCapped(t *testing.T) {
	e := newEnv(t, func(c *registry.Config) { c.MaxLogBytes = 1000 })
	e.host.output = strings.Repeat("x", 5000) + "\n"
	var streamed bytes.Buffer
	b, _, err := e.reg.BuildCustom(t.Context(), registry.CustomRequest{Capped: true,
		CustomBuild: pandastack.CustomBuild{TeamID: "team_a", Name: "big", Spec: []byte("FROM base\nRUN big")}}, nil, &streamed)
	if err != nil {
		t.Fatal(err)
	}
	if streamed.Len() < 5000 {
		t.Errorf("the caller's stream got %d bytes, want all of it", streamed.Len())
	}
	data, err := os.ReadFile(filepath.Join(e.logDir, b.ID+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 1300 || !strings.Contains(string(data), "[log cut here") || !strings.HasSuffix(string(data), "ready ("+b.TemplateID+")\n") {
		t.Errorf("kept log (%d bytes):\n%s", len(data), data)
	}
}

// A client that leaves mid-build: the run is recorded failed.
func TestCancelledBuildIsRecorded(t *testing.T) {
	e := newEnv(t)
	e.host.block = make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, _, err := e.reg.BuildCustom(ctx, registry.CustomRequest{Capped: true,
			CustomBuild: pandastack.CustomBuild{TeamID: "team_a", Name: "gone", Spec: []byte("FROM base\nRUN x")}}, nil, io.Discard)
		done <- err
	}()
	waitFor(t, "the build to run", func() bool {
		bs, _ := e.reg.Builds(t.Context(), "team_a", "gone")
		return len(bs) == 1
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled build: %v", err)
	}
	bs, _ := e.reg.Builds(t.Context(), "team_a", "gone")
	if len(bs) != 1 || bs[0].Status != "failed" || bs[0].EndedAt == nil {
		t.Errorf("cancelled build's run: %+v", bs)
	}
	if _, err := e.reg.Resolve(t.Context(), "team_a", "gone"); pandastack.ErrorCode(err) != pandastack.ENotFound {
		t.Errorf("a cancelled build made a version: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestParseRef(t *testing.T) {
	for ref, want := range map[string][3]string{
		"web": {"web", "", ""}, "web:v2": {"web", "v2", ""}, "web:3": {"web", "3", ""}, "web@abc": {"web", "", "abc"},
	} {
		n, tag, id := registry.ParseRef(ref)
		if [3]string{n, tag, id} != want {
			t.Errorf("ParseRef(%q) = %q %q %q, want %q", ref, n, tag, id, want)
		}
	}
	for _, bad := range []string{"", "../x", "web@../../etc", "a/b:1", ".hidden", "web:a/b"} {
		if _, err := newEnv(t).reg.Resolve(t.Context(), "team_a", bad); pandastack.ErrorCode(err) != pandastack.EInvalid {
			t.Errorf("Resolve(%q): %v, want invalid_argument", bad, err)
		}
	}
}
