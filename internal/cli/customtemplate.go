package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// stepLine matches a custom build's step lines: "[3/7] line 9: ...".
var stepLine = regexp.MustCompile(`^\[(\d+)/(\d+)\] `)

// runCustomBuild uploads a spec file and its context and streams the build,
// with a step counter and progress bar on stderr.
func runCustomBuild(ctx context.Context, s *streams, p *parser, pos []string, file, name, tag, team string, cpus, mem, disk int) int {
	if name == "" {
		return p.usageError(s, "a custom build needs --name NAME")
	}
	if len(pos) > 1 {
		return p.usageError(s, "at most one CONTEXT_DIR")
	}
	spec, err := os.ReadFile(file)
	if err != nil {
		return fail(s, err)
	}
	dir := filepath.Dir(file)
	if len(pos) == 1 {
		dir = pos[0]
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return p.usageError(s, fmt.Sprintf("build context %s is not a directory", dir))
	}
	t, b, err := p.client.client().BuildCustomTemplate(ctx, sdk.CustomBuildParams{
		Name: name, Spec: spec, ContextDir: dir, Tag: tag, CPUs: cpus, MemoryMiB: mem, DiskGiB: disk, Team: team,
		OnLine: func(line string) {
			fmt.Fprintln(s.out, line)
			if m := stepLine.FindStringSubmatch(line); m != nil {
				n, _ := strconv.Atoi(m[1])
				total, _ := strconv.Atoi(m[2])
				fmt.Fprintf(s.err, "%s step %d/%d\n", bar(n, total), n, total)
			}
		},
	})
	if b != nil {
		fmt.Fprintf(s.err, "build %s: %s (logs: pandastack template logs %s %s)\n", b.ID, b.Status, name, b.ID)
	}
	if err != nil {
		return fail(s, err)
	}
	cached := 0
	if b != nil {
		for _, st := range b.Steps {
			if st.Cached {
				cached++
			}
		}
		fmt.Fprintf(s.out, "built template %s version %d (id %s): %d of %d steps from the cache\n", t.Name, t.Version, t.ID, cached, len(b.Steps))
	}
	return 0
}

// bar draws a 20-character progress bar.
func bar(n, total int) string {
	if total <= 0 {
		return ""
	}
	w := 20 * n / total
	return "[" + strings.Repeat("#", w) + strings.Repeat(".", 20-w) + "]"
}

func runTemplateVersions(ctx context.Context, s *streams, args []string) int {
	p := newParser("template versions", "NAME", "List a template's versions, oldest first. Create from one with\n--template NAME:VERSION or NAME:TAG.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	vs, err := p.client.client().TemplateVersions(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, vs)
		return 0
	}
	t := newTable(s.out, "VERSION", "TAGS", "ID", "CPUS", "MEMORY", "BUILT")
	for _, v := range vs {
		t.row(strconv.Itoa(v.Version), strings.Join(v.Tags, ","), v.ID, strconv.Itoa(v.CPUs), strconv.Itoa(v.MemoryMiB)+" MiB", when(v.BuiltAt))
	}
	t.flush()
	return 0
}

func runTemplateBuilds(ctx context.Context, s *streams, args []string) int {
	p := newParser("template builds", "NAME", "List a template's custom build runs, newest first: your team's, else the public template's.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	bs, err := p.client.client().TemplateBuilds(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, bs)
		return 0
	}
	t := newTable(s.out, "BUILD", "STATUS", "VERSION", "STEPS", "CACHED", "STARTED")
	for _, b := range bs {
		cached := 0
		for _, st := range b.Steps {
			if st.Cached {
				cached++
			}
		}
		t.row(b.ID, b.Status, strconv.Itoa(b.Version), strconv.Itoa(len(b.Steps)), strconv.Itoa(cached), when(b.StartedAt))
	}
	t.flush()
	return 0
}

func runTemplateLogs(ctx context.Context, s *streams, args []string) int {
	p := newParser("template logs", "NAME BUILD_ID", "Print the kept log of a build run of your team or of a public template.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	log, err := p.client.client().TemplateBuildLog(ctx, pos[0], pos[1])
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprint(s.out, log)
	return 0
}
