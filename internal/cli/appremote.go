package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// runAppRemote prints an app's git remote URL, for `git remote add`.
func runAppRemote(ctx context.Context, s *streams, args []string) int {
	p := newParser("app remote", "NAME", "Print the app's git remote URL, with the API key as its password, for\n"+
		"`git remote add pandastack URL`; a push to the app's branch there deploys it. With --no-key the URL\n"+
		"has no credentials and git asks its credential helper (any user name; the API key as the password).").withClient(ctx)
	noKey := p.fs.Bool("no-key", false, "leave the API key out of the URL")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	c := p.client.client()
	a, err := c.GetApp(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	u, err := url.Parse(c.BaseURL())
	if err != nil {
		return fail(s, fmt.Errorf("base URL %q: %w", c.BaseURL(), err))
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + a.GitRemote
	if !*noKey {
		u.User = url.UserPassword("pandastack", p.client.key())
	}
	fmt.Fprintln(s.out, u.String())
	return 0
}
