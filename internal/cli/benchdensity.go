package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// densityResult is what `pandastack bench --density --json` prints.
type densityResult struct {
	Template string `json:"template"`
	Accel    string `json:"accel"`
	Machine  string `json:"machine"`
	Date     string `json:"date"`
	Max      int    `json:"max"`
	// Count is how many idle sandboxes ran at once; StoppedBy says why
	// no more were started.
	Count       int     `json:"count"`
	StoppedBy   string  `json:"stopped_by"`
	MarginMiB   int64   `json:"margin_mib"`
	PressurePct float64 `json:"pressure_pct"`
	// The host's MemAvailable before the first sandbox and with Count.
	MemAvailableStartMiB float64 `json:"mem_available_start_mib"`
	MemAvailableEndMiB   float64 `json:"mem_available_end_mib"`
	// Host anonymous memory (QEMU's own, under TCG mostly translated
	// code) added per sandbox, and the host's memory pressure (share of
	// the last 10 s stalled on memory) with Count running, after the
	// idle window.
	AnonPerSandboxMiB float64 `json:"anon_per_sandbox_mib"`
	MemPressureEndPct float64 `json:"mem_pressure_end_pct"`
	// PSS and RSS of each idle sandbox's QEMU, averaged: PSS counts pages
	// shared with other VMs (the template's page cache) divided among them.
	PSSPerSandboxMiB float64 `json:"pss_per_sandbox_mib"`
	RSSPerSandboxMiB float64 `json:"rss_per_sandbox_mib"`
	// CPUPerSandboxPct is the sandboxes' QEMU CPU time over the idle
	// window ÷ Count, as a percentage of one host core; HostBusyPct is
	// the whole host's busy share over the same window.
	CPUPerSandboxPct float64 `json:"cpu_per_sandbox_pct"`
	IdleWindowS      float64 `json:"idle_window_s"`
	HostBusyPct      float64 `json:"host_busy_pct"`
	// One exec(true) in each of the Count sandboxes after the idle window,
	// against 20 in one sandbox alone before the others started; each
	// sandbox ran one exec when it was created (an idle sandbox is a used
	// one), so neither counts a sandbox's first command.
	ExecAloneP50 float64 `json:"exec_alone_p50_ms"`
	ExecAloneP99 float64 `json:"exec_alone_p99_ms"`
	ExecP50      float64 `json:"exec_p50_ms"`
	ExecP99      float64 `json:"exec_p99_ms"`
	ExecP99Ratio float64 `json:"exec_p99_alone_ratio"`
	Answered     int     `json:"answered"`
	CreateP50    float64 `json:"create_p50_ms"`
}

// densityLimits bound a density run.
type densityLimits struct {
	Max      int
	MarginKB int64 // stop while the host's MemAvailable is below this
	// PressurePct: stop once the host's memory pressure (some avg10)
	// reaches it. MemAvailable alone cannot say the host is full: every
	// VM's RAM is a file in the page cache, which it counts as free to
	// reclaim, and reclaiming it means writing guest memory out and
	// reading it back.
	PressurePct float64
}

// densityStop says why no more sandboxes start ("" to go on): at max,
// when the host's memory pressure (pressurePct, -1 when not reported)
// reached the limit, or when the host's MemAvailable would fall below the
// margin with one more sandbox costing what each has cost so far (perKB;
// 0 before the first).
func densityStop(l densityLimits, count int, availKB, perKB int64, pressurePct float64) string {
	switch {
	case count >= l.Max:
		return fmt.Sprintf("reached --max %d", l.Max)
	case l.PressurePct > 0 && pressurePct >= l.PressurePct:
		return fmt.Sprintf("host memory pressure %.1f %% (some avg10) reached --pressure %.1f %%", pressurePct, l.PressurePct)
	case availKB-perKB < l.MarginKB:
		return fmt.Sprintf("host MemAvailable %d MiB: one more sandbox (~%d MiB) would leave less than the margin of %d MiB",
			availKB>>10, perKB>>10, l.MarginKB>>10)
	}
	return ""
}

// idleCost is what the sandboxes ids cost between two usage readings:
// PSS and RSS per sandbox (from the later reading), their CPU as a
// percentage of one core per sandbox, and the host's busy percentage.
// Sandboxes missing from either reading are left out of the CPU sum.
func idleCost(before, after *sdk.BenchUsage, ids map[string]bool, window time.Duration) (pssMiB, rssMiB, cpuPct, hostPct float64, n int) {
	cpu0 := map[string]float64{}
	for _, m := range before.Machines {
		if ids[m.ID] {
			cpu0[m.ID] = m.CPUMs
		}
	}
	var pss, rss int64
	var cpu float64
	for _, m := range after.Machines {
		if !ids[m.ID] {
			continue
		}
		n++
		pss += m.PSSKB
		rss += m.RSSKB
		if c0, ok := cpu0[m.ID]; ok {
			cpu += m.CPUMs - c0
		}
	}
	if n == 0 || window <= 0 {
		return 0, 0, 0, 0, n
	}
	pssMiB = float64(pss) / 1024 / float64(n)
	rssMiB = float64(rss) / 1024 / float64(n)
	cpuPct = cpu / float64(window.Milliseconds()) * 100 / float64(n)
	if dt := after.HostTotalMs - before.HostTotalMs; dt > 0 {
		hostPct = (after.HostBusyMs - before.HostBusyMs) / dt * 100
	}
	return pssMiB, rssMiB, cpuPct, hostPct, n
}

// benchDensity starts idle sandboxes of tpl until l says stop, measures
// what they cost idle and whether each still answers, and kills them all.
func benchDensity(ctx context.Context, c *sdk.Client, tpl string, l densityLimits, window time.Duration, progress func(string, ...any)) (*densityResult, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	res := &densityResult{Template: tpl, Accel: h.Accel, Machine: machine(), Date: time.Now().UTC().Format("2006-01-02"),
		Max: l.Max, MarginMiB: l.MarginKB >> 10, PressurePct: l.PressurePct, IdleWindowS: window.Seconds()}
	u, err := c.BenchUsage(ctx)
	if err != nil {
		return nil, fmt.Errorf("read host usage (an admin key on a server that measures its host): %w", err)
	}
	res.MemAvailableStartMiB = float64(u.MemAvailableKB) / 1024
	anonStartKB := u.AnonKB
	var all []*sdk.Sandbox
	defer func() { killAll(context.WithoutCancel(ctx), all) }()
	params := sdk.CreateSandboxParams{Template: tpl, TTLSeconds: 3600, Metadata: map[string]string{"bench": "density"}}
	ids := map[string]bool{}
	var creates []float64
	for {
		var perKB int64
		if len(all) > 0 {
			var pss int64
			for _, m := range u.Machines {
				if ids[m.ID] {
					pss += m.PSSKB
				}
			}
			perKB = pss / int64(len(all))
		}
		if why := densityStop(l, len(all), u.MemAvailableKB, perKB, u.MemPressurePct); why != "" {
			res.StoppedBy = why
			break
		}
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, params)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.StoppedBy = fmt.Sprintf("create failed: %v", err)
			break
		}
		creates = append(creates, msOf(time.Since(t0)))
		all = append(all, sb)
		ids[sb.ID] = true
		// An idle sandbox is one that ran something and went quiet: one
		// command first, so the check below times a sandbox's usual exec,
		// not its first (under TCG a first command pays for translating
		// the guest's exec path, ~5× a later one).
		if _, err := timeExec(ctx, sb); err != nil {
			return nil, fmt.Errorf("first exec in sandbox %s: %w", sb.ID, err)
		}
		if len(all) == 1 {
			progress("measuring exec with one sandbox alone...")
			var xs []float64
			for i := 0; i < 20; i++ {
				d, err := timeExec(ctx, sb)
				if err != nil {
					return nil, fmt.Errorf("exec alone: %w", err)
				}
				xs = append(xs, d)
			}
			res.ExecAloneP50, res.ExecAloneP99 = pct(xs, 50), pct(xs, 99)
		}
		if u, err = c.BenchUsage(ctx); err != nil {
			return nil, fmt.Errorf("read host usage: %w", err)
		}
		if len(all)%10 == 0 {
			progress("%d idle sandboxes (host MemAvailable %d MiB, anonymous %d MiB, memory pressure %.1f %%)...",
				len(all), u.MemAvailableKB>>10, u.AnonKB>>10, u.MemPressurePct)
		}
	}
	res.Count = len(all)
	res.CreateP50 = pct(creates, 50)
	if res.Count == 0 {
		return res, fmt.Errorf("no sandbox started: %s", res.StoppedBy)
	}
	progress("%d idle sandboxes (%s); letting them settle, then measuring a %s idle window...", res.Count, res.StoppedBy, window)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(3 * time.Second):
	}
	before, err := c.BenchUsage(ctx)
	if err != nil {
		return nil, fmt.Errorf("read host usage: %w", err)
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	after, err := c.BenchUsage(ctx)
	if err != nil {
		return nil, fmt.Errorf("read host usage: %w", err)
	}
	res.PSSPerSandboxMiB, res.RSSPerSandboxMiB, res.CPUPerSandboxPct, res.HostBusyPct, _ = idleCost(before, after, ids, time.Since(t0))
	res.MemAvailableEndMiB = float64(after.MemAvailableKB) / 1024
	res.AnonPerSandboxMiB = float64(after.AnonKB-anonStartKB) / 1024 / float64(res.Count)
	res.MemPressureEndPct = after.MemPressurePct

	progress("checking that each of the %d sandboxes answers an exec...", res.Count)
	var xs []float64
	var errs []error
	for _, sb := range all {
		d, err := timeExec(ctx, sb)
		if err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s: %w", sb.ID, err))
			continue
		}
		xs = append(xs, d)
	}
	res.Answered = len(xs)
	res.ExecP50, res.ExecP99 = pct(xs, 50), pct(xs, 99)
	res.ExecP99Ratio = ratio(res.ExecP99, res.ExecAloneP99)
	progress("killing the %d sandboxes...", res.Count)
	killAll(ctx, all)
	all = nil
	if len(errs) > 0 {
		return res, fmt.Errorf("%d of %d sandboxes did not answer: %w", len(errs), res.Count, errors.Join(errs...))
	}
	return res, nil
}

// timeExec runs true in sb and returns how long it took, in ms.
func timeExec(ctx context.Context, sb *sdk.Sandbox) (float64, error) {
	t0 := time.Now()
	r, err := sb.Exec(ctx, "true", sdk.ExecOptions{TimeoutSeconds: 120})
	if err != nil {
		return 0, err
	}
	if r.ExitCode != 0 {
		return 0, fmt.Errorf("exec true exited %d", r.ExitCode)
	}
	return msOf(time.Since(t0)), nil
}

// killAll kills sandboxes, four at a time.
func killAll(ctx context.Context, sbs []*sdk.Sandbox) {
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for _, sb := range sbs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_ = sb.Kill(ctx)
		}()
	}
	wg.Wait()
}

// printDensity writes a density run as text.
func printDensity(w io.Writer, r *densityResult) {
	fmt.Fprintf(w, "template %s on %s, accelerator %s, %s\n\n", r.Template, r.Machine, r.Accel, r.Date)
	rows := [][2]string{
		{"idle sandboxes reached", fmt.Sprintf("%d of --max %d", r.Count, r.Max)},
		{"stopped by", r.StoppedBy},
		{"host MemAvailable before / with them", fmt.Sprintf("%.0f / %.0f MiB", r.MemAvailableStartMiB, r.MemAvailableEndMiB)},
		{"memory per idle sandbox (PSS / RSS)", fmt.Sprintf("%.1f / %.1f MiB", r.PSSPerSandboxMiB, r.RSSPerSandboxMiB)},
		{"host CPU per idle sandbox", fmt.Sprintf("%.2f %% of a core (over %.0f s; host busy %.0f %%)", r.CPUPerSandboxPct, r.IdleWindowS, r.HostBusyPct)},
		{"exec(true) alone (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms", r.ExecAloneP50, r.ExecAloneP99)},
		{"exec(true) in each at density (p50 / p99)", fmt.Sprintf("%.1f / %.1f ms (%d answered)", r.ExecP50, r.ExecP99, r.Answered)},
		{"p99 at density ÷ p99 alone", fmt.Sprintf("%.2f", r.ExecP99Ratio)},
		{"create p50 while filling", fmt.Sprintf("%.1f ms", r.CreateP50)},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "  %-42s %s\n", row[0], row[1])
	}
}
