package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func quotaCommands() []command {
	return []command{
		{"get", "show a team's limits and usage (no TEAM: your own)", runQuotasGet},
		{"set", "change a team's limits (admin)", runQuotasSet},
	}
}

func runQuotasGet(ctx context.Context, s *streams, args []string) int {
	p := newParser("quotas get", "[TEAM]", "Show a team's limits (0: none) and what it holds now. TEAM (a name or id)\n"+
		"needs an admin key; without it, the key's own team.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) > 1 {
		return p.usageError(s, fmt.Sprintf("want at most 1 argument, got %d", len(pos)))
	}
	var q *sdk.Quotas
	var err error
	if len(pos) == 1 {
		q, err = p.client.client().TeamQuotas(ctx, pos[0])
	} else {
		q, err = p.client.client().Quotas(ctx)
	}
	if err != nil {
		return fail(s, err)
	}
	printQuotas(s, q, *asJSON)
	return 0
}

func printQuotas(s *streams, q *sdk.Quotas, asJSON bool) {
	if asJSON {
		printJSON(s.out, q)
		return
	}
	set := map[string]bool{}
	for _, f := range q.Overridden {
		set[f] = true
	}
	limit := func(n int) string {
		if n == 0 {
			return "none"
		}
		return strconv.Itoa(n)
	}
	src := func(name string) string {
		if set[name] {
			return "team"
		}
		return "default"
	}
	fmt.Fprintf(s.out, "team %s (%s)\n", q.Team, q.TeamID)
	t := newTable(s.out, "LIMIT", "VALUE", "IN USE", "FROM")
	u := q.Usage
	rows := []struct {
		name  string
		value int
		used  int
	}{
		{"max_sandboxes", q.MaxSandboxes, u.Sandboxes},
		{"max_vcpus", q.MaxVCPUs, u.VCPUs},
		{"max_memory_mib", q.MaxMemoryMiB, u.MemoryMiB},
		{"max_snapshots", q.MaxSnapshots, u.Snapshots},
		{"max_volumes", q.MaxVolumes, u.Volumes},
		{"max_service_machines", q.MaxServiceMachines, u.ServiceMachines},
		{"max_concurrent_builds", q.MaxConcurrentBuilds, u.Builds},
	}
	for _, r := range rows {
		t.row(r.name, limit(r.value), strconv.Itoa(r.used), src(r.name))
	}
	t.row("max_disk_gib", limit(q.MaxDiskGiB), fmt.Sprintf("%.1f", float64(u.DiskMiB)/1024), src("max_disk_gib"))
	rps := "none"
	if q.RequestsPerSecond > 0 {
		rps = strconv.FormatFloat(q.RequestsPerSecond, 'g', -1, 64)
	}
	t.row("requests_per_second", rps, "-", src("requests_per_second"))
	t.row("burst", limit(q.Burst), "-", src("burst"))
	t.flush()
	if st := q.Storage; st != nil {
		fmt.Fprintf(s.out, "host storage %s: %d MiB free of %d MiB, reserve %d MiB (at or below it new allocations answer 507)\n",
			st.Dir, st.FreeBytes>>20, st.TotalBytes>>20, st.ReserveBytes>>20)
	}
}

func runQuotasSet(ctx context.Context, s *streams, args []string) int {
	p := newParser("quotas set", "TEAM LIMIT=VALUE...", "Change a team's limits (needs an admin key). VALUE is a number (0: no limit)\n"+
		"or \"default\" to go back to the server's default. Limits: max_sandboxes,\n"+
		"max_vcpus, max_memory_mib, max_disk_gib, max_snapshots, max_volumes, max_service_machines,\n"+
		"max_concurrent_builds, requests_per_second, burst.\n\n"+
		"  pandastack quotas set acme max_sandboxes=50 requests_per_second=20\n"+
		"  pandastack quotas set acme max_sandboxes=default").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		return p.usageError(s, "want TEAM and at least one LIMIT=VALUE")
	}
	u, err := quotaUpdate(pos[1:])
	if err != nil {
		return p.usageError(s, err.Error())
	}
	q, err := p.client.client().SetTeamQuotas(ctx, pos[0], u)
	if err != nil {
		return fail(s, err)
	}
	printQuotas(s, q, *asJSON)
	return 0
}

// quotaUpdate parses LIMIT=VALUE arguments.
func quotaUpdate(args []string) (sdk.QuotaUpdate, error) {
	var u sdk.QuotaUpdate
	ints := map[string]**int{
		"max_sandboxes": &u.MaxSandboxes, "max_service_machines": &u.MaxServiceMachines,
		"max_snapshots": &u.MaxSnapshots, "max_volumes": &u.MaxVolumes,
		"max_concurrent_builds": &u.MaxConcurrentBuilds, "max_vcpus": &u.MaxVCPUs,
		"max_memory_mib": &u.MaxMemoryMiB, "max_disk_gib": &u.MaxDiskGiB, "burst": &u.Burst,
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || v == "" {
			return u, fmt.Errorf("%q: want LIMIT=VALUE", a)
		}
		k = strings.ReplaceAll(strings.TrimLeft(k, "-"), "-", "_")
		_, isInt := ints[k]
		if !isInt && k != "requests_per_second" {
			return u, fmt.Errorf("unknown limit %q", k)
		}
		if v == "default" {
			u.Reset = append(u.Reset, k)
			continue
		}
		if k == "requests_per_second" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return u, fmt.Errorf("%s: %q is not a number", k, v)
			}
			u.RequestsPerSecond = &f
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return u, fmt.Errorf("%s: %q is not a whole number", k, v)
		}
		*ints[k] = &n
	}
	return u, nil
}
