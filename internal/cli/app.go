package cli

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func appCommands() []command {
	return []command{
		{"create", "create an app from a git repository", runAppCreate},
		{"deploy", "deploy an app's branch (or --ref) and wait for it", runAppDeploy},
		{"status", "show an app and its deploys", runAppStatus},
		{"logs", "print a deploy's log (default the newest deploy)", runAppLogs},
		{"rollback", "serve the previous release again", runAppRollback},
		{"previews", "list the app's pull request previews", runAppPreviews},
		{"remote", "print the app's git remote URL (git push there deploys)", runAppRemote},
		{"ls", "list apps", runAppList},
		{"rm", "delete an app with its releases", runAppRemove},
	}
}

func runAppCreate(ctx context.Context, s *streams, args []string) int {
	p := newParser("app create", "NAME [GIT_URL]", "Create an app served at NAME.apps.DOMAIN from a git repository (https, git://, ssh\nor a path on the server); with no GIT_URL it is deployed by git push to its own remote\n(pandastack app remote NAME). Prints the app as JSON, with its webhook secret (shown once).").withClient(ctx)
	var params sdk.CreateAppParams
	env := kvFlag{}
	p.fs.StringVar(&params.Branch, "branch", "main", "branch to deploy")
	p.fs.Var(env, "env", "KEY=VALUE given to builds and the app (repeatable; sealed at rest)")
	p.fs.StringVar(&params.BuildCommand, "build", "", "build command (default: detected)")
	p.fs.StringVar(&params.StartCommand, "start", "", "start command (default: detected)")
	p.fs.IntVar(&params.Port, "port", 0, "port the app listens on, as $PORT (default: detected)")
	p.fs.StringVar(&params.HealthPath, "health-path", "/", "path the health check GETs")
	p.fs.IntVar(&params.HealthTimeoutSeconds, "health-timeout", 0, "seconds the health check retries (0: the server's default)")
	p.fs.IntVar(&params.AutoHibernateSeconds, "auto-hibernate", 0, "hibernate the app after this many idle seconds (0: never)")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) < 1 || len(pos) > 2 {
		return p.usageError(s, "want NAME [GIT_URL]")
	}
	params.Name, params.Env = pos[0], env
	if len(pos) == 2 {
		params.GitURL = pos[1]
	}
	a, err := p.client.client().CreateApp(ctx, params)
	if err != nil {
		return fail(s, err)
	}
	printJSON(s.out, a)
	return 0
}

func runAppDeploy(ctx context.Context, s *streams, args []string) int {
	p := newParser("app deploy", "NAME", "Deploy the app's branch (or --ref), wait until it is live or failed, and print the log.").withClient(ctx)
	ref := p.fs.String("ref", "", "branch or tag (default the app's branch)")
	noWait := p.fs.Bool("no-wait", false, "print the deploy id and return")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	c := p.client.client()
	d, err := c.DeployApp(ctx, pos[0], *ref)
	if err != nil {
		return fail(s, err)
	}
	if *noWait {
		fmt.Fprintln(s.out, d.ID)
		return 0
	}
	if d, err = c.WaitDeploy(ctx, pos[0], d.ID); err != nil {
		return fail(s, err)
	}
	fmt.Fprint(s.err, d.Log)
	fmt.Fprintf(s.out, "%s %s %s\n", d.ID, d.Status, d.Error)
	if d.Status != sdk.DeployLive {
		return 1
	}
	return 0
}

func runAppStatus(ctx context.Context, s *streams, args []string) int {
	p := newParser("app status", "NAME", "Show an app, then its deploys, newest first.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	c := p.client.client()
	a, err := c.GetApp(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	ds, err := c.ListDeploys(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprintf(s.out, "%s  %s  %s@%s  live: %s\n\n", a.Name, a.URL, a.GitURL, a.Branch, dash(a.LiveDeployID))
	t := newTable(s.out, "DEPLOY", "STATUS", "REF", "COMMIT", "FRAMEWORK", "CREATED", "ERROR")
	for _, d := range ds {
		commit := d.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		t.row(d.ID, d.Status, d.Ref, dash(commit), dash(d.Framework), d.CreatedAt.Local().Format(time.DateTime), d.Error)
	}
	t.flush()
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runAppLogs(ctx context.Context, s *streams, args []string) int {
	p := newParser("app logs", "NAME [DEPLOY]", "Print a deploy's log (default the newest deploy).").withClient(ctx)
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) < 1 || len(pos) > 2 {
		return p.usageError(s, "want NAME [DEPLOY]")
	}
	c := p.client.client()
	id := ""
	if len(pos) == 2 {
		id = pos[1]
	} else {
		ds, err := c.ListDeploys(ctx, pos[0])
		if err != nil {
			return fail(s, err)
		}
		if len(ds) == 0 {
			return fail(s, fmt.Errorf("app %s has no deploys", pos[0]))
		}
		id = ds[0].ID
	}
	log, err := c.DeployLogs(ctx, pos[0], id)
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprint(s.out, log)
	return 0
}

func runAppRollback(ctx context.Context, s *streams, args []string) int {
	p := newParser("app rollback", "NAME", "Serve the previous release again (or --deploy's).").withClient(ctx)
	deploy := p.fs.String("deploy", "", "deploy id to go back to (default the newest release not live)")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	d, err := p.client.client().RollbackApp(ctx, pos[0], *deploy)
	if err != nil {
		return fail(s, err)
	}
	fmt.Fprintf(s.out, "%s %s\n", d.ID, d.Status)
	return 0
}

func runAppList(ctx context.Context, s *streams, args []string) int {
	p := newParser("app ls", "", "List the team's apps.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListApps(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.App{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "NAME", "URL", "REPOSITORY", "BRANCH", "LIVE")
	for _, a := range list {
		t.row(a.Name, a.URL, a.GitURL, a.Branch, dash(a.LiveDeployID))
	}
	t.flush()
	return 0
}

func runAppRemove(ctx context.Context, s *streams, args []string) int {
	p := newParser("app rm", "NAME", "Delete an app: its route, release machines and snapshots.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().DeleteApp(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	return 0
}
