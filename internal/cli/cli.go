// Package cli is the pandastack command line: sandbox, file, key, quota and
// template commands that talk to a server through the Go SDK (sdk/go).
//
// Main is the whole program; cmd/pandastack only wires it to the process.
// Nothing here calls os.Exit: every command returns its exit status (0 ok,
// 1 failure, 2 usage error; `sandbox exec` returns the command's own).
//
// Adding a command: write a func(ctx, *streams, []string) int in its own
// file and list it in the commands table below.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/pandastack/pandastack"
)

// streams are the standard streams of one run.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// command is one top-level command (or a subcommand of a group).
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, s *streams, args []string) int
}

// commands is the table of top-level commands, in the order `help` lists
// them. It is filled in init because `help` refers to it.
var commands []command

func init() {
	commands = []command{
		group("sandbox", "create, list, run commands in and kill sandboxes", sandboxCommands),
		group("fs", "read, write and list files in a sandbox", fsCommands),
		group("snapshot", "list and delete snapshots", snapshotCommands),
		group("volume", "create, list and delete durable volumes", volumeCommands),
		group("fn", "deploy, invoke, list and delete serverless functions", fnCommands),
		group("cron", "schedule functions; list schedules and their runs", cronCommands),
		group("db", "create, list, hibernate, wake and delete managed PostgreSQL databases", dbCommands),
		{"machines", "list the team's service machines (sandbox create --lifetime service)", runMachines},
		group("app", "create, deploy, roll back and delete git-driven apps", appCommands),
		group("keys", "create, list, revoke and rotate API keys", keysCommands),
		group("quotas", "show and change a team's limits", quotaCommands),
		group("template", "list and build templates", templateCommands),
		{"ca", "print the server's CA certificate (trust it for the TLS listener)", runCA},
		{"version", "print the version", runVersion},
		{"help", "show help for a command", runHelp},

		{"server", "run the API server, host agent and template builder", runServer},
		{"doctor", "check this host can run sandboxes (KVM or TCG, tools)", runDoctor},
		{"bench", "measure create, exec and cold boot latency against a server", runBench},
		{"mcp", "serve sandbox tools to an AI agent over MCP (stdio)", runMCP},
	}
}

// Main runs the pandastack command line with args (without the program
// name) and returns the process exit status.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &streams{in: stdin, out: stdout, err: stderr}
	// Global flags before the command: pandastack --api-key K sandbox ls.
	var cf clientFlags
	fs := flag.NewFlagSet("pandastack", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printMainUsage(s.out)
			return 0
		}
		fmt.Fprintf(s.err, "error: %v\n", err)
		printMainUsage(s.err)
		return 2
	}
	args = fs.Args()
	if len(args) == 0 {
		printMainUsage(s.err)
		return 2
	}
	ctx = withClientFlags(ctx, cf)
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(ctx, s, args[1:])
		}
	}
	fmt.Fprintf(s.err, "error: unknown command %q\n\n", args[0])
	printMainUsage(s.err)
	return 2
}

func printMainUsage(w io.Writer) {
	fmt.Fprintf(w, "pandastack runs untrusted code in microVM sandboxes.\n\n")
	fmt.Fprintf(w, "usage: pandastack [--base-url URL] [--api-key KEY] COMMAND [ARGS]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nThe server address and key come from PANDASTACK_BASE_URL (default %s)\n", "http://localhost:8080")
	fmt.Fprintf(w, "and PANDASTACK_API_KEY; --base-url and --api-key override them.\n")
	fmt.Fprintf(w, "Run 'pandastack help COMMAND' or 'pandastack COMMAND -h' for details.\n")
}

// group makes a command that dispatches to subcommands.
func group(name, summary string, subs func() []command) command {
	c := command{name: name, summary: summary}
	c.run = func(ctx context.Context, s *streams, args []string) int {
		list := subs()
		if len(args) == 0 {
			printGroupUsage(s.err, name, summary, list)
			return 2
		}
		switch args[0] {
		case "help", "-h", "-help", "--help":
			printGroupUsage(s.out, name, summary, list)
			return 0
		}
		for _, sc := range list {
			if sc.name == args[0] {
				return sc.run(ctx, s, args[1:])
			}
		}
		fmt.Fprintf(s.err, "error: unknown command %q\n\n", name+" "+args[0])
		printGroupUsage(s.err, name, summary, list)
		return 2
	}
	return c
}

func printGroupUsage(w io.Writer, name, summary string, subs []command) {
	fmt.Fprintf(w, "pandastack %s: %s\n\nusage: pandastack %s COMMAND [ARGS]\n\ncommands:\n", name, summary, name)
	for _, c := range subs {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'pandastack %s COMMAND -h' for details.\n", name)
}

// runHelp: `pandastack help [COMMAND [SUBCOMMAND]]`.
func runHelp(ctx context.Context, s *streams, args []string) int {
	if len(args) == 0 {
		printMainUsage(s.out)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] && c.name != "help" {
			return c.run(ctx, s, append(args[1:], "-h"))
		}
	}
	fmt.Fprintf(s.err, "error: unknown command %q\n", strings.Join(args, " "))
	return 2
}

func runVersion(_ context.Context, s *streams, args []string) int {
	p := newParser("version", "", "Print the version of this program.")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	fmt.Fprintf(s.out, "pandastack %s\n", pandastack.Version)
	return 0
}
