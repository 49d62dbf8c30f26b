package cli

import (
	"context"
	"fmt"
	"strconv"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func keysCommands() []command {
	return []command{
		{"create", "create an API key for a team and print it", runKeysCreate},
		{"ls", "list API keys", runKeysList},
		{"revoke", "revoke an API key", runKeysRevoke},
		{"rotate", "replace an API key with a new one and print it", runKeysRotate},
	}
}

func templateCommands() []command {
	return []command{
		{"ls", "list templates", runTemplateList},
		{"build", "build a catalog template, or a custom one from a spec file (-f)", runTemplateBuild},
		{"versions", "list a template's versions and tags", runTemplateVersions},
		{"builds", "list a template's build runs", runTemplateBuilds},
		{"logs", "print the kept log of a build run", runTemplateLogs},
	}
}

func runKeysCreate(ctx context.Context, s *streams, args []string) int {
	p := newParser("keys create", "",
		"Create an API key for a team (created if it does not exist) and print the key on\n"+
			"stdout. It is shown only once. Needs an admin key.").withClient(ctx)
	team := p.fs.String("team", "", "team `NAME` (required)")
	name := p.fs.String("name", "", "a label for the key")
	e2b := p.fs.Bool("e2b", false, "make the key in E2B's shape (e2b_...) for the stock E2B SDKs' E2B_API_KEY")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	if *team == "" {
		return p.usageError(s, "--team is required")
	}
	create := p.client.client().CreateKey
	if *e2b {
		create = p.client.client().CreateE2BKey
	}
	k, err := create(ctx, *team, *name)
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprintln(s.out, k.Key)
	fmt.Fprintf(s.err, "created key %s (%s...) for team %s; store it now, it is not shown again\n", k.ID, k.Prefix, k.Team)
	return 0
}

func runTemplateList(ctx context.Context, s *streams, args []string) int {
	p := newParser("template ls", "", "List the templates sandboxes can be created from.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	ts, err := p.client.client().Templates(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if ts == nil {
			ts = []sdk.Template{}
		}
		printJSON(s.out, ts)
		return 0
	}
	t := newTable(s.out, "NAME", "ID", "ACCEL", "CPUS", "MEMORY", "BUILT")
	for _, tp := range ts {
		t.row(tp.Name, tp.ID, tp.Accel, strconv.Itoa(tp.CPUs), strconv.Itoa(tp.MemoryMiB)+" MiB", when(tp.BuiltAt))
	}
	t.flush()
	return 0
}

func runTemplateBuild(ctx context.Context, s *streams, args []string) int {
	p := newParser("template build", "NAME | -f FILE --name NAME [CONTEXT_DIR]", "Build (or rebuild) a template on the server, printing the build log as it\n"+
		"comes. NAME builds a catalog template. -f builds a custom template from a spec\n"+
		"file; its build context (what COPY reads) is CONTEXT_DIR, by default the spec\n"+
		"file's directory. Any key builds custom templates for its own team (public\n"+
		"names are reserved); an admin key builds catalog templates, and custom ones\n"+
		"for the public catalog or, with --team, for a team.").withClient(ctx)
	file := p.fs.String("f", "", "spec `FILE` of a custom template")
	name := p.fs.String("name", "", "custom template `NAME`")
	tag := p.fs.String("tag", "", "also tag the new version (e.g. v2)")
	cpus := p.fs.Int("cpus", 0, "vCPUs (overrides the spec's CPUS)")
	mem := p.fs.Int("memory", 0, "memory in MiB (overrides the spec's MEMORY)")
	disk := p.fs.Int("disk", 0, "root disk in GiB (overrides the spec's DISK)")
	team := p.fs.String("team", "", "admin key: build the custom template for this `TEAM` instead of the public catalog")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if *file != "" {
		return runCustomBuild(ctx, s, p, pos, *file, *name, *tag, *team, *cpus, *mem, *disk)
	}
	if len(pos) != 1 {
		return p.usageError(s, fmt.Sprintf("want 1 argument, got %d", len(pos)))
	}
	t, err := p.client.client().BuildTemplate(ctx, pos[0], func(line string) { fmt.Fprintln(s.out, line) })
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprintf(s.out, "built template %s (id %s) in %d ms\n", t.Name, t.ID, t.BuildMs)
	return 0
}
