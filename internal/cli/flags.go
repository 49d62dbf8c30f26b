package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// clientFlags are --base-url and --api-key, accepted before the command
// and by every command that talks to the server.
type clientFlags struct {
	baseURL, apiKey string
}

func (cf *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&cf.baseURL, "base-url", cf.baseURL, "server address (default $PANDASTACK_BASE_URL, else http://localhost:8080)")
	fs.StringVar(&cf.apiKey, "api-key", cf.apiKey, "API key (default $PANDASTACK_API_KEY)")
}

type clientFlagsKey struct{}

func withClientFlags(ctx context.Context, cf clientFlags) context.Context {
	return context.WithValue(ctx, clientFlagsKey{}, cf)
}

func clientFlagsFrom(ctx context.Context) clientFlags {
	cf, _ := ctx.Value(clientFlagsKey{}).(clientFlags)
	return cf
}

// client makes an SDK client from the environment and the flags.
func (cf clientFlags) client() *sdk.Client {
	var opts []sdk.Option
	if cf.baseURL != "" {
		opts = append(opts, sdk.WithBaseURL(cf.baseURL))
	}
	if cf.apiKey != "" {
		opts = append(opts, sdk.WithAPIKey(cf.apiKey))
	}
	return sdk.NewClient(opts...)
}

// parser parses one command's flags and positional arguments.
type parser struct {
	fs     *flag.FlagSet
	name   string // "sandbox create"
	args   string // positional synopsis, e.g. "ID PATH"
	desc   string
	client clientFlags
}

// newParser returns a parser for the command name with the given positional
// synopsis and description. Add flags to p.fs before calling parse.
func newParser(name, args, desc string) *parser {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &parser{fs: fs, name: name, args: args, desc: desc}
}

// withClient adds --base-url and --api-key, defaulting to the global ones.
func (p *parser) withClient(ctx context.Context) *parser {
	p.client = clientFlagsFrom(ctx)
	p.client.register(p.fs)
	return p
}

func (p *parser) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: pandastack %s", p.name)
	hasFlags := false
	p.fs.VisitAll(func(*flag.Flag) { hasFlags = true })
	if hasFlags {
		fmt.Fprint(w, " [flags]")
	}
	if p.args != "" {
		fmt.Fprint(w, " "+p.args)
	}
	fmt.Fprintf(w, "\n\n%s\n", p.desc)
	if hasFlags {
		fmt.Fprintf(w, "\nflags:\n")
		p.fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			if len(f.Name) == 1 {
				fmt.Fprintf(w, "  -%s", f.Name)
			} else {
				fmt.Fprintf(w, "  --%s", f.Name)
			}
			if name != "" {
				fmt.Fprintf(w, " %s", name)
			}
			fmt.Fprintf(w, "\n        %s", usage)
			if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "map[]" && d != "[]" {
				fmt.Fprintf(w, " (default %q)", d)
			}
			fmt.Fprintln(w)
		})
	}
}

// parse parses args, allowing flags before and after positional arguments;
// everything after "--" is positional. It checks there are exactly nargs
// positional arguments (-1: any number). On failure (or -h) it has printed
// what is needed and ok is false, code the exit status.
func (p *parser) parse(s *streams, args []string, nargs int) (pos []string, code int, ok bool) {
	head, tail := args, []string(nil)
	for i, a := range args {
		if a == "--" {
			head, tail = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := p.fs.Parse(head); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				p.usage(s.out)
				return nil, 0, false
			}
			return nil, p.usageError(s, err.Error()), false
		}
		rest := p.fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		head = rest[1:]
	}
	pos = append(pos, tail...)
	if nargs >= 0 && len(pos) != nargs {
		msg := fmt.Sprintf("want %d arguments, got %d", nargs, len(pos))
		if nargs == 0 {
			msg = "unexpected arguments: " + strings.Join(pos, " ")
		}
		return nil, p.usageError(s, msg), false
	}
	return pos, 0, true
}

// usageError prints msg and the usage on stderr and returns 2.
func (p *parser) usageError(s *streams, msg string) int {
	fmt.Fprintf(s.err, "error: %s\n\n", msg)
	p.usage(s.err)
	return 2
}

// kvFlag collects repeated KEY=VALUE flags.
type kvFlag map[string]string

func (kv kvFlag) String() string {
	var parts []string
	for k, v := range kv {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (kv kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	kv[k] = v
	return nil
}

// key is the API key the client sends: --api-key, else
// $PANDASTACK_API_KEY, else $PANDASTACK_TOKEN.
func (cf clientFlags) key() string {
	for _, k := range []string{cf.apiKey, os.Getenv("PANDASTACK_API_KEY"), os.Getenv("PANDASTACK_TOKEN")} {
		if k != "" {
			return k
		}
	}
	return ""
}
