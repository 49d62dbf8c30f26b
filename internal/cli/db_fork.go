package cli

import (
	"context"
)

func runDBFork(ctx context.Context, s *streams, args []string) int {
	p := newParser("db fork", "ID|NAME NEW-NAME", "Copy a running database into a new one named NEW-NAME (memory and data\n"+
		"copy-on-write; the parent keeps serving) and print the new one's connection URI.\n"+
		"The fork has its own password: the parent's does not open it.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print the new database as JSON")
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	d, err := p.client.client().ForkDatabase(ctx, pos[0], pos[1])
	if err != nil {
		return fail(s, err)
	}
	printDatabase(s, d, *asJSON)
	return 0
}
