package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// teamWeb is the name both teams build: not "web", which the admin's custom
// template tests put in the shared server's public catalog (public names
// are reserved).
const teamWeb = "team-web"

// Team keys build custom templates of their own: two teams both build
// teamWeb and each gets its own; a third team sees neither; the sandboxes of
// each run its team's build with the defaults (ENV, WORKDIR) the template
// set, captured at create and kept through a hibernation.
func TestTeamTemplates(t *testing.T) {
	ctx := context.Background()
	teamA, teamB, teamC := teamClient(t, "tpl-team-a"), teamClient(t, "tpl-team-b"), teamClient(t, "tpl-team-c")
	build := func(t *testing.T, c *sdk.Client, spec string) (sdk.Template, *sdk.TemplateBuild) {
		t.Helper()
		bctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		defer cancel()
		t0 := time.Now()
		tpl, b, err := c.BuildCustomTemplate(bctx, sdk.CustomBuildParams{Name: teamWeb, Spec: []byte(spec)})
		t.Logf("a team's build of web took %v", time.Since(t0).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return tpl, b
	}
	// Each a RUN in a VM and a bake: the smallest builds that show the
	// team's content and the template's defaults.
	tplA, buildA := build(t, teamA, "FROM base\nENV WHO=team-a\nWORKDIR /srv/a\nRUN echo built-by-a > /srv/a/who.txt\n")
	tplB, _ := build(t, teamB, "FROM base\nRUN echo built-by-b > /who.txt\n")

	t.Run("each team's web is its own, version 1", func(t *testing.T) {
		if tplA.Version != 1 || tplB.Version != 1 || tplA.ID == tplB.ID || tplA.TeamID == "" || tplB.TeamID == "" || tplA.TeamID == tplB.TeamID {
			t.Fatalf("team a's web %+v, team b's %+v", tplA, tplB)
		}
	})

	t.Run("a sandbox runs its team's build with the template's defaults", func(t *testing.T) {
		sa := newSandbox(t, teamA, sdk.CreateSandboxParams{Template: teamWeb})
		if sa.TemplateID != tplA.ID || sa.TemplateVersion != 1 {
			t.Fatalf("team a's sandbox is of build %s version %d, want %s version 1", sa.TemplateID, sa.TemplateVersion, tplA.ID)
		}
		if got := execOut(t, sa, "cat who.txt; pwd; echo $WHO"); got != "built-by-a\n/srv/a\nteam-a" {
			t.Errorf("team a's sandbox: %q", got)
		}
		sb := newSandbox(t, teamB, sdk.CreateSandboxParams{Template: teamWeb + ":1"})
		if got := execOut(t, sb, "cat /who.txt; test -e /srv/a && echo leaked || echo clean"); got != "built-by-b\nclean" {
			t.Errorf("team b's sandbox: %q", got)
		}
		// The defaults are on the sandbox's record: a hibernated and woken
		// sandbox keeps them.
		if err := sa.Hibernate(ctx); err != nil {
			t.Fatalf("hibernate: %v", err)
		}
		if got := execOut(t, sa, "pwd; echo $WHO"); got != "/srv/a\nteam-a" {
			t.Errorf("team a's sandbox after a wake: %q", got)
		}
	})

	t.Run("another team's web answers like a missing template", func(t *testing.T) {
		for _, tp := range mustTemplates(t, teamC) {
			if tp.Name == teamWeb {
				t.Errorf("team c lists %+v", tp)
			}
		}
		want404 := func(what string, err error) {
			t.Helper()
			var apiErr *sdk.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != 404 {
				t.Errorf("%s: %v, want 404", what, err)
			}
		}
		_, err := teamC.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: teamWeb})
		want404("team c creating from web", err)
		_, err = teamC.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: teamWeb + "@" + tplA.ID})
		want404("team c naming team a's exact build", err)
		_, err = teamC.TemplateVersions(ctx, teamWeb)
		want404("team c listing web's versions", err)
		_, err = teamB.TemplateBuildLog(ctx, teamWeb, buildA.ID)
		want404("team b reading team a's build log", err)
		if log, err := teamA.TemplateBuildLog(ctx, teamWeb, buildA.ID); err != nil || !strings.Contains(log, "RUN echo built-by-a") {
			t.Errorf("team a reading its own build log (err %v):\n%s", err, log)
		}
	})

	t.Run("a team's templates count against its disk quota", func(t *testing.T) {
		admin := main.client(main.admin)
		q, err := teamB.Quotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := tplB.MemoryMiB + tplB.DiskMiB; q.Usage.DiskMiB < want {
			t.Fatalf("team b holds %d MiB of disk with a %d MiB template version", q.Usage.DiskMiB, want)
		}
		// At its limit, a team builds no more templates.
		limit := 1
		if _, err := admin.SetTeamQuotas(ctx, "tpl-team-b", sdk.QuotaUpdate{MaxDiskGiB: &limit}); err != nil {
			t.Fatal(err)
		}
		defer admin.SetTeamQuotas(ctx, "tpl-team-b", sdk.QuotaUpdate{Reset: []string{"max_disk_gib"}})
		_, _, err = teamB.BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: teamWeb, Spec: []byte("FROM base\nRUN true\n")})
		if !sdk.IsQuotaExceeded(err) || !strings.Contains(err.Error(), "max_disk_gib") {
			t.Fatalf("a build past max_disk_gib: %v, want quota_exceeded naming max_disk_gib", err)
		}
	})

	t.Run("catalog names are reserved", func(t *testing.T) {
		_, _, err := teamB.BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: "base", Spec: []byte("FROM base\nRUN true\n")})
		var apiErr *sdk.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 409 {
			t.Errorf("a team building base: %v, want 409", err)
		}
	})
}

func mustTemplates(t *testing.T, c *sdk.Client) []sdk.Template {
	t.Helper()
	ts, err := c.Templates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
