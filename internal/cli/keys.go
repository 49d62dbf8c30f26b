package cli

import (
	"context"
	"fmt"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func runKeysList(ctx context.Context, s *streams, args []string) int {
	p := newParser("keys ls", "", "List API keys (never their secrets), revoked ones included. An admin key\n"+
		"lists every team's (or --team's); any other key its own team's.").withClient(ctx)
	team := p.fs.String("team", "", "only this team's keys (`NAME` or id)")
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	keys, err := p.client.client().ListKeys(ctx, *team)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if keys == nil {
			keys = []sdk.Key{}
		}
		printJSON(s.out, keys)
		return 0
	}
	t := newTable(s.out, "ID", "TEAM", "NAME", "PREFIX", "ROLE", "CREATED", "REVOKED")
	for _, k := range keys {
		role, revoked := "team", "-"
		if k.Admin {
			role = "admin"
		}
		if k.RevokedAt != nil {
			revoked = when(*k.RevokedAt)
		}
		t.row(k.ID, k.Team, k.Name, k.Prefix+"...", role, when(k.CreatedAt), revoked)
	}
	t.flush()
	return 0
}

func runKeysRevoke(ctx context.Context, s *streams, args []string) int {
	p := newParser("keys revoke", "KEY_ID", "Revoke an API key: it is refused (401) from its next request on. An admin key\n"+
		"may revoke any key, any other key its own team's.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().RevokeKey(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	fmt.Fprintf(s.err, "revoked key %s\n", pos[0])
	return 0
}

func runKeysRotate(ctx context.Context, s *streams, args []string) int {
	p := newParser("keys rotate", "KEY_ID", "Replace an API key with a new one of the same team, name and role, and revoke\n"+
		"the old one. Prints the new key on stdout; it is shown only once.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	k, err := p.client.client().RotateKey(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprintln(s.out, k.Key)
	fmt.Fprintf(s.err, "key %s replaced by %s (%s...) for team %s; the old key no longer works; store the new one now\n",
		pos[0], k.ID, k.Prefix, k.Team)
	return 0
}
