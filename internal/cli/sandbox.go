package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func sandboxCommands() []command {
	return []command{
		{"create", "create a sandbox and print its id", runSandboxCreate},
		{"ls", "list sandboxes", runSandboxList},
		{"get", "show a sandbox as JSON", runSandboxGet},
		{"exec", "run a command in a sandbox, streaming its output", runSandboxExec},
		{"shell", "open an interactive terminal in a sandbox", runSandboxShell},
		{"kill", "kill a sandbox", runSandboxKill},
		{"fork", "make copy-on-write children of a running sandbox", runSandboxFork},
		{"snapshot", "save a running sandbox whole; it runs on", runSandboxSnapshot},
		{"hibernate", "save a sandbox and free its memory and CPU", runSandboxSleep(false)},
		{"wake", "bring a hibernated sandbox back", runSandboxSleep(true)},
		{"ttl", "set how many seconds from now a sandbox lives", runSandboxTTL},
		{"ps", "list the commands started in a sandbox", runSandboxPs},
		{"network", "show or set a sandbox's network policy", runSandboxNetwork},
		{"url", "print a signed URL for a port of a sandbox", runSandboxURL},
		{"run-code", "run Python in a code-interpreter sandbox's live interpreter", runSandboxRunCode},
	}
}

func runSandboxCreate(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox create", "", "Create a sandbox and print its id (or, with --json, the sandbox).").withClient(ctx)
	template := p.fs.String("template", "base", "template to start from")
	snapshot := p.fs.String("snapshot", "", "start from this snapshot (`ID`) instead of a template")
	ttl := p.fs.Int("ttl", 0, "seconds until the sandbox expires (default: the server's, 300)")
	lifetime := p.fs.String("lifetime", "", "service: a service machine (no TTL, never reaped, re-attached after restarts; listed by `pandastack machines`)")
	meta, env := kvFlag{}, kvFlag{}
	p.fs.Var(meta, "meta", "metadata `KEY=VALUE` (repeatable)")
	p.fs.Var(env, "env", "environment variable `KEY=VALUE` for every command (repeatable)")
	asJSON := p.fs.Bool("json", false, "print the sandbox as JSON")
	cpus := p.fs.Int("cpus", 0, "vCPUs, if not the template's (that size is baked on first use)")
	mem := p.fs.Int("memory", 0, "memory in MiB, if not the template's")
	disk := p.fs.Int("disk", 0, "root disk in GiB, if bigger than the template's")
	var mounts []sdk.VolumeMount
	p.fs.Var(volumeFlag{&mounts}, "volume", "mount a durable volume, `NAME:/path` (repeatable, at most 2)")
	var idle secondsFlag
	p.fs.Var(&idle, "auto-hibernate", "hibernate after this long without exec, file, port or run_code use (`30s` or seconds; default never)")
	onExpiry := p.fs.String("on-expiry", "", "what the TTL's end does: kill (default) or hibernate (it sleeps until woken or killed)")
	nf := p.networkFlags()
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	policy, err := nf.policy()
	if err != nil {
		return p.usageError(s, err.Error())
	}
	tpl := *template
	if *snapshot != "" {
		tpl = "" // the snapshot says what it was made from
	}
	sb, err := p.client.client().CreateSandbox(ctx, sdk.CreateSandboxParams{
		Template: tpl, Snapshot: *snapshot, TTLSeconds: *ttl, Metadata: meta, Env: env, CPUs: *cpus, MemoryMiB: *mem, DiskGiB: *disk,
		Network: policy, AutoHibernateSeconds: int(idle), Volumes: mounts, Lifetime: *lifetime, OnExpiry: *onExpiry,
	})
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, sb)
	} else {
		fmt.Fprintln(s.out, sb.ID)
	}
	return 0
}

// runMachines: `pandastack machines`, the team's service machines.
func runMachines(ctx context.Context, s *streams, args []string) int {
	p := newParser("machines", "", "List the team's service machines (--all: also ended ones) and its cap on them.").withClient(ctx)
	all := p.fs.Bool("all", false, "include killed and failed ones (a failed one says why)")
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListMachines(ctx, *all)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "ID", "TEMPLATE", "STATE", "ACCEL", "CREATED", "REASON")
	for _, sb := range list.Machines {
		t.row(sb.ID, sb.Template, sb.State, sb.Accel, when(sb.CreatedAt), sb.EndReason)
	}
	t.flush()
	limit := "no cap"
	if list.Limit > 0 {
		limit = fmt.Sprintf("cap %d", list.Limit)
	}
	fmt.Fprintf(s.out, "%d live (%s)\n", list.Count, limit)
	return 0
}

func runSandboxList(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox ls", "", "List the team's live sandboxes (--all: also ended ones).").withClient(ctx)
	meta := kvFlag{}
	p.fs.Var(meta, "meta", "only sandboxes with metadata `KEY=VALUE` (repeatable)")
	all := p.fs.Bool("all", false, "include killed and expired sandboxes")
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListSandboxes(ctx, sdk.ListParams{Metadata: meta, All: *all})
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []*sdk.Sandbox{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "ID", "TEMPLATE", "STATE", "ACCEL", "CREATED", "EXPIRES", "METADATA")
	for _, sb := range list {
		t.row(sb.ID, sb.Template, sb.State, sb.Accel, when(sb.CreatedAt), when(sb.ExpiresAt), formatKV(sb.Metadata))
	}
	t.flush()
	return 0
}

func runSandboxGet(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox get", "ID", "Show a sandbox (live or ended) as JSON.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	sb, err := p.client.client().GetSandbox(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	printJSON(s.out, sb)
	return 0
}

func runSandboxExec(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox exec", "ID -- CMD [ARG...]",
		"Run a command in a sandbox. Its stdout and stderr stream to this program's, byte for\n"+
			"byte, and this program exits with the command's exit code. One CMD word runs with\n"+
			"/bin/sh -c (so 'echo $HOME | wc -c' works when quoted); several run without a shell.").withClient(ctx)
	timeout := p.fs.Float64("timeout", 0, "kill the command after `SECONDS` (0: no limit)")
	env := kvFlag{}
	p.fs.Var(env, "env", "environment variable `KEY=VALUE` (repeatable)")
	cwd := p.fs.String("cwd", "", "working `DIR` (absolute)")
	user := p.fs.String("user", "", "run as `USER`")
	stdin := p.fs.Bool("stdin", false, "send this program's stdin to the command")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		return p.usageError(s, "need a sandbox ID and a command")
	}
	opts := sdk.ExecOptions{
		Env: env, Cwd: *cwd, User: *user, TimeoutSeconds: *timeout,
		OnStdout:      func(b []byte) { s.out.Write(b) },
		OnStderr:      func(b []byte) { s.err.Write(b) },
		DiscardOutput: true,
	}
	cmd := pos[1]
	if len(pos) > 2 {
		cmd, opts.Args = "", pos[1:]
	}
	if *stdin {
		b, err := io.ReadAll(s.in)
		if err != nil {
			return fail(s, fmt.Errorf("read stdin: %w", err))
		}
		opts.Stdin = b
	}
	res, err := p.client.client().Sandbox(pos[0]).Exec(ctx, cmd, opts)
	if err != nil {
		return fail(s, err)
	}
	if res.TimedOut {
		fmt.Fprintf(s.err, "pandastack: command timed out after %gs and was killed\n", *timeout)
	}
	if res.ExitCode < 0 || res.ExitCode > 255 {
		return 255
	}
	return res.ExitCode
}

func runSandboxKill(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox kill", "ID", "Kill a sandbox. Killing one that has already ended is not an error.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().Sandbox(pos[0]).Kill(ctx); err != nil {
		return fail(s, err)
	}
	return 0
}

func runSandboxTTL(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox ttl", "ID SECONDS", "Make a sandbox expire SECONDS from now; prints the new expiry time.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	sec, err := strconv.Atoi(pos[1])
	if err != nil {
		return p.usageError(s, fmt.Sprintf("SECONDS must be a whole number, got %q", pos[1]))
	}
	sb := p.client.client().Sandbox(pos[0])
	if err := sb.SetTTL(ctx, sec); err != nil {
		return fail(s, err)
	}
	fmt.Fprintln(s.out, when(sb.ExpiresAt))
	return 0
}

func runSandboxPs(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox ps", "ID", "List the commands started in a sandbox.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	ps, err := p.client.client().Sandbox(pos[0]).Processes(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if ps == nil {
			ps = []sdk.Process{}
		}
		printJSON(s.out, ps)
		return 0
	}
	t := newTable(s.out, "PID", "STATE", "BACKGROUND", "EXIT", "STARTED", "COMMAND")
	for _, pr := range ps {
		state, exit := "running", "-"
		if !pr.Running {
			state = "exited"
		}
		if pr.ExitCode != nil {
			exit = strconv.Itoa(*pr.ExitCode)
		}
		command := pr.Cmd
		if command == "" {
			command = strings.Join(pr.Args, " ")
		}
		t.row(strconv.Itoa(pr.PID), state, strconv.FormatBool(pr.Background), exit, when(pr.StartedAt), command)
	}
	t.flush()
	return 0
}
