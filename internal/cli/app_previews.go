package cli

import (
	"context"
	"strconv"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func runAppPreviews(ctx context.Context, s *streams, args []string) int {
	p := newParser("app previews", "NAME", "List the app's pull request previews (opened, updated and removed by GitHub's\npull_request webhook), each served at pr-N--NAME.apps.DOMAIN.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	list, err := p.client.client().ListPreviews(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.Preview{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "PR", "URL", "HEAD", "STATUS", "LIVE", "UPDATED")
	for _, pr := range list {
		head := pr.HeadRef
		if len(pr.HeadSHA) >= 12 {
			head += "@" + pr.HeadSHA[:12]
		}
		t.row(strconv.Itoa(pr.Number), pr.URL, dash(head), dash(pr.Status), dash(pr.LiveDeployID), pr.UpdatedAt.Local().Format(time.DateTime))
	}
	t.flush()
	return 0
}
