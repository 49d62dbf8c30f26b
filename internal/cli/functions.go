package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func fnCommands() []command {
	return []command{
		{"deploy", "deploy a directory as a new version of a function", runFnDeploy},
		{"invoke", "invoke a function and print its result", runFnInvoke},
		{"ls", "list functions", runFnList},
		{"logs", "print an invocation's logs", runFnLogs},
		{"rm", "delete a function", runFnRemove},
	}
}

func cronCommands() []command {
	return []command{
		{"create", "schedule a function and print the schedule's id", runCronCreate},
		{"ls", "list schedules", runCronList},
		{"rm", "delete a schedule", runCronRemove},
		{"runs", "list a schedule's runs, newest first", runCronRuns},
	}
}

func runFnDeploy(ctx context.Context, s *streams, args []string) int {
	p := newParser("fn deploy", "DIR", "Pack DIR (tar.gz) and deploy it as the function's newest version. The handler\n"+
		"is FILE.FUNCTION: main.handler is handler in main.py (python) or main.js/.mjs/.cjs (node).").withClient(ctx)
	name := p.fs.String("name", "", "function name (required)")
	runtime := p.fs.String("runtime", "", "python or node (required)")
	handler := p.fs.String("handler", "", "FILE.FUNCTION (required)")
	timeout := p.fs.Int("timeout", 0, "timeout in seconds (default 30)")
	memory := p.fs.Int("memory", 0, "memory in MiB (default: the template's)")
	conc := p.fs.Int("max-concurrency", 0, "invocations at once (default 10)")
	tmpl := p.fs.String("template", "", "template to run in (default base)")
	isolation := p.fs.String("isolation", "", "fresh (default: a new microVM per invocation) or warm (reused between invocations)")
	public := p.fs.Bool("public", false, "let anyone call the HTTP trigger (fn-NAME.DOMAIN) without an API key")
	env := kvFlag{}
	p.fs.Var(env, "env", "KEY=VALUE for the function's environment (repeatable; sealed at rest)")
	asJSON := p.fs.Bool("json", false, "print the function as JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if *name == "" || *runtime == "" || *handler == "" {
		return p.usageError(s, "--name, --runtime and --handler are required")
	}
	bundle, err := sdk.BundleDir(pos[0])
	if err != nil {
		return fail(s, err)
	}
	f, err := p.client.client().DeployFunction(ctx, sdk.FunctionConfig{Name: *name, Runtime: *runtime, Handler: *handler, Env: env,
		TimeoutSeconds: *timeout, MemoryMiB: *memory, MaxConcurrency: *conc, Template: *tmpl, HTTPPublic: *public, Isolation: *isolation}, bundle)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, f)
	} else {
		fmt.Fprintf(s.out, "%s version %d %s\n", f.Name, f.Version, f.URL)
	}
	return 0
}

func runFnInvoke(ctx context.Context, s *streams, args []string) int {
	p := newParser("fn invoke", "NAME", "Invoke a function with --data (JSON) as the event and print what it returned.\n"+
		"A handler that raised prints its error on stderr and exits 1.").withClient(ctx)
	data := p.fs.String("data", "{}", "the event, JSON")
	async := p.fs.Bool("async", false, "queue it and print the invocation id")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if !json.Valid([]byte(*data)) {
		return p.usageError(s, "--data must be JSON")
	}
	c := p.client.client()
	if *async {
		inv, err := c.InvokeFunctionAsync(ctx, pos[0], json.RawMessage(*data))
		if err != nil {
			return fail(s, err)
		}
		fmt.Fprintln(s.out, inv.ID)
		return 0
	}
	r, err := c.InvokeFunction(ctx, pos[0], json.RawMessage(*data))
	if err != nil {
		return fail(s, err)
	}
	if r.FunctionError != "" {
		fmt.Fprintf(s.err, "%s (%s): %s: %s\n%s", r.InvocationID, r.FunctionError, r.Error.Type, r.Error.Message, r.Error.Stack)
		return 1
	}
	fmt.Fprintln(s.out, string(r.Body))
	return 0
}

func runFnList(ctx context.Context, s *streams, args []string) int {
	p := newParser("fn ls", "", "List the team's functions.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListFunctions(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.Function{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "NAME", "VERSION", "RUNTIME", "HANDLER", "TIMEOUT", "UPDATED")
	for _, f := range list {
		t.row(f.Name, strconv.Itoa(f.Version), f.Latest.Runtime, f.Latest.Handler, strconv.Itoa(f.TimeoutSeconds)+"s", when(f.UpdatedAt))
	}
	t.flush()
	return 0
}

func runFnLogs(ctx context.Context, s *streams, args []string) int {
	p := newParser("fn logs", "NAME INVOCATION", "Print what an invocation's handler printed.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	inv, err := p.client.client().GetInvocation(ctx, pos[0], pos[1])
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprint(s.out, inv.Logs)
	return 0
}

func runFnRemove(ctx context.Context, s *streams, args []string) int {
	p := newParser("fn rm", "NAME", "Delete a function, its versions and invocations.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().DeleteFunction(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	return 0
}

func runCronCreate(ctx context.Context, s *streams, args []string) int {
	p := newParser("cron create", "", "Schedule a function; prints the new schedule's id first. --schedule takes 5 cron\n"+
		"fields, 6 with seconds first, @every 10s, @hourly/@daily/..., or @at 2026-01-02T15:04:05Z (once).").withClient(ctx)
	fn := p.fs.String("function", "", "function name (required)")
	expr := p.fs.String("schedule", "", "when (required)")
	tz := p.fs.String("tz", "UTC", "IANA time zone the schedule is in")
	data := p.fs.String("data", "", "the event each run passes, JSON")
	overlap := p.fs.String("overlap", "", "skip (default), queue or allow: what a run does while the previous one runs")
	missed := p.fs.String("missed", "", "skip (default) or catch_up: runs missed while the server was down")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	if *fn == "" || *expr == "" {
		return p.usageError(s, "--function and --schedule are required")
	}
	if *data != "" && !json.Valid([]byte(*data)) {
		return p.usageError(s, "--data must be JSON")
	}
	sc, err := p.client.client().CreateSchedule(ctx, sdk.ScheduleParams{Function: *fn, Schedule: *expr, TZ: *tz,
		Data: json.RawMessage(*data), Overlap: *overlap, Missed: *missed})
	if err != nil {
		return fail(s, err)
	}
	next := "never"
	if sc.NextFireAt != nil {
		next = sc.NextFireAt.Format("2006-01-02T15:04:05Z07:00")
	}
	fmt.Fprintf(s.out, "%s next %s\n", sc.ID, next)
	return 0
}

func runCronList(ctx context.Context, s *streams, args []string) int {
	p := newParser("cron ls", "", "List the team's schedules.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListSchedules(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.Schedule{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "ID", "FUNCTION", "SCHEDULE", "TZ", "OVERLAP", "MISSED", "NEXT")
	for _, sc := range list {
		next := "-"
		if sc.NextFireAt != nil {
			next = sc.NextFireAt.Format("2006-01-02T15:04:05Z")
		}
		t.row(sc.ID, sc.Function, sc.Schedule, sc.TZ, sc.Overlap, sc.Missed, next)
	}
	t.flush()
	return 0
}

func runCronRemove(ctx context.Context, s *streams, args []string) int {
	p := newParser("cron rm", "ID", "Delete a schedule and its run history.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().DeleteSchedule(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	return 0
}

func runCronRuns(ctx context.Context, s *streams, args []string) int {
	p := newParser("cron runs", "ID", "List a schedule's runs, newest first: execution id, status (succeeded, failed,\n"+
		"timed_out, skipped, or pending/queued/running), fire time and duration.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	runs, err := p.client.client().ScheduleRuns(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, runs)
		return 0
	}
	for _, r := range runs {
		fmt.Fprintf(s.out, "%s %s %s %dms\n", r.ExecutionID, r.Status, r.FireAt.Format("2006-01-02T15:04:05Z"), r.DurationMs)
	}
	return 0
}
