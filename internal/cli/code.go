package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func runSandboxRunCode(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox run-code", "ID [CODE]",
		"Run Python in a code-interpreter sandbox's live interpreter (state persists between\n"+
			"calls). CODE, or stdin when it is absent or '-', is the code. Output streams as it is\n"+
			"produced; the value of the last expression is printed; plots are saved with --png-dir.\n"+
			"Exits 1 if the code raised (the traceback goes to stderr).").withClient(ctx)
	timeout := p.fs.Float64("timeout", 0, "interrupt the run after `SECONDS` (0: no limit)")
	ctxID := p.fs.String("context", "", "interpreter context `ID` (separate namespace; default \"default\")")
	pngDir := p.fs.String("png-dir", "", "save PNG results (plots) in `DIR` as result-N.png")
	asJSON := p.fs.Bool("json", false, "print the whole execution as one JSON object instead")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) < 1 || len(pos) > 2 {
		return p.usageError(s, "need a sandbox ID and optionally the code")
	}
	src := ""
	if len(pos) == 2 && pos[1] != "-" {
		src = pos[1]
	} else {
		b, err := io.ReadAll(s.in)
		if err != nil {
			return fail(s, fmt.Errorf("read stdin: %w", err))
		}
		src = string(b)
	}
	opts := sdk.CodeOptions{ContextID: *ctxID, TimeoutSeconds: *timeout}
	if !*asJSON {
		opts.OnStdout = func(t string) { io.WriteString(s.out, t) }
		opts.OnStderr = func(t string) { io.WriteString(s.err, t) }
	}
	ex, err := p.client.client().Sandbox(pos[0]).RunCode(ctx, src, opts)
	if err != nil {
		return fail(s, err)
	}
	n := 0
	for _, r := range ex.Results {
		if r.PNG == "" || *pngDir == "" {
			continue
		}
		b, err := r.PNGBytes()
		if err != nil {
			return fail(s, fmt.Errorf("decode PNG result: %w", err))
		}
		n++
		path := fmt.Sprintf("%s/result-%d.png", strings.TrimRight(*pngDir, "/"), n)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return fail(s, fmt.Errorf("save PNG result: %w", err))
		}
		if !*asJSON {
			fmt.Fprintf(s.err, "saved %s\n", path)
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(ex, "", "  ")
		fmt.Fprintln(s.out, string(b))
	} else {
		for _, r := range ex.Results {
			if r.IsMainResult && r.Text != "" {
				fmt.Fprintln(s.out, r.Text)
			}
		}
		if ex.Error != nil {
			fmt.Fprint(s.err, strings.Join(ex.Error.Traceback, ""))
			if len(ex.Error.Traceback) == 0 {
				fmt.Fprintf(s.err, "%s: %s\n", ex.Error.Name, ex.Error.Value)
			}
		}
	}
	if ex.Error != nil {
		return 1
	}
	return 0
}
