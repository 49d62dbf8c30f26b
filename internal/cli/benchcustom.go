package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// customBenchResult is what `pandastack bench --custom --json` prints: the
// cost of building a custom template and of a size variant.
type customBenchResult struct {
	Template string `json:"template"`
	Parent   string `json:"parent"`
	Accel    string `json:"accel"`
	Machine  string `json:"machine"`
	Date     string `json:"date"`
	// A build with every step new: 2 steps in VMs (COPY, RUN), then the
	// bake (cold boot, START, READY, save).
	BuildCold float64 `json:"custom_build_cold_ms"`
	// The same spec with only its last RUN changed: that step and the bake.
	RebuildLastStep float64 `json:"custom_rebuild_last_step_ms"`
	// The same spec again: every step from the cache.
	RebuildUnchanged float64 `json:"custom_rebuild_unchanged_ms"`
	// The first create at another memory size (the variant's bake), then one
	// more (a restore).
	VariantFirstCreate float64 `json:"size_variant_first_create_ms"`
	VariantCreate      float64 `json:"size_variant_create_ms"`
}

const benchSpec = `FROM %s
ENV BENCH=%d
WORKDIR /srv
COPY app.py app.py
RUN python3 -c 'print(%d)' > /srv/first.txt
RUN echo %s > /srv/last.txt
START python3 -m http.server 8124
READY python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8124/')"
`

// benchCustom measures custom template builds from parent and a size
// variant of the result. It needs an admin key.
func benchCustom(ctx context.Context, c *sdk.Client, parent string, s *streams) (*customBenchResult, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return nil, err
	}
	res := &customBenchResult{Template: "bench-custom", Parent: parent, Accel: h.Accel, Machine: machine(), Date: time.Now().UTC().Format("2006-01-02")}
	dir, err := os.MkdirTemp("", "pandastack-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "app.py"), []byte("print('bench')\n"), 0o644); err != nil {
		return nil, err
	}
	nonce := time.Now().UnixNano()
	build := func(what, last string) (float64, error) {
		t0 := time.Now()
		_, _, err := c.BuildCustomTemplate(ctx, sdk.CustomBuildParams{Name: res.Template, ContextDir: dir,
			Spec: []byte(fmt.Sprintf(benchSpec, parent, nonce, nonce, last))})
		ms := float64(time.Since(t0).Microseconds()) / 1000
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		fmt.Fprintf(s.err, "%s: %.0f ms\n", what, ms)
		return ms, nil
	}
	if res.BuildCold, err = build("cold build", "one"); err != nil {
		return nil, err
	}
	if res.RebuildLastStep, err = build("rebuild, last step changed", "two"); err != nil {
		return nil, err
	}
	if res.RebuildUnchanged, err = build("rebuild, nothing changed", "two"); err != nil {
		return nil, err
	}
	mem := 640 + int(nonce%64)*16 // a size no earlier run baked
	for i, dst := range []*float64{&res.VariantFirstCreate, &res.VariantCreate} {
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Template: res.Template, MemoryMiB: mem, TTLSeconds: 120})
		if err != nil {
			return nil, fmt.Errorf("create at %d MiB: %w", mem, err)
		}
		*dst = float64(time.Since(t0).Microseconds()) / 1000
		_ = sb.Kill(context.WithoutCancel(ctx))
		fmt.Fprintf(s.err, "create %d at %d MiB: %.0f ms\n", i+1, mem, *dst)
	}
	return res, nil
}
