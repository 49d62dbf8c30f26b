package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pandastack/pandastack/internal/mcp"
)

// runMCP: `pandastack mcp`, an MCP server on stdin/stdout for AI agents.
func runMCP(ctx context.Context, s *streams, args []string) int {
	p := newParser("mcp", "",
		"Serve sandbox tools to an AI agent over the Model Context Protocol: JSON-RPC\n"+
			"messages, one per line, on stdin and stdout (logs go to stderr). The tools work\n"+
			"on one sandbox, started from template \"base\" on first use (or by sandbox_create),\n"+
			"and killed when stdin ends or the program is interrupted. Configure an agent with\n"+
			"the command `pandastack mcp` and PANDASTACK_BASE_URL and PANDASTACK_API_KEY set.").withClient(ctx)
	verbose := p.fs.Bool("v", false, "log every message, not only tool calls")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(s.err, &slog.HandlerOptions{Level: level}))
	srv := mcp.New(p.client.client(), log)
	if p.client.apiKey != "" {
		srv.SetAPIKey(p.client.apiKey)
	}
	if err := srv.Serve(ctx, s.in, s.out); err != nil {
		fmt.Fprintf(s.err, "error: %v\n", err)
		return 1
	}
	return 0
}
