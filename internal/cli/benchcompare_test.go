package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeRun(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBenchCompare: `bench --compare OLD --from NEW` prints every figure's
// ratio and exits non-zero exactly when one is worse than the threshold —
// latencies by growing, throughput by shrinking.
func TestBenchCompare(t *testing.T) {
	dir := t.TempDir()
	old := writeRun(t, dir, "old.json", `{"template":"base","accel":"tcg","creates":60,"create_p50_ms":50,"parallel20_ms":1500,"proxy_rps":1000,"fork_p50_ms":0,"template_build_ms":90000,"db_pgbench_router_tps":500,"db_pgbench_router_inside_ratio":0.5,"db_pgbench_clients":4}`)
	cases := []struct {
		name, run string
		code      int
		regressed []string
	}{
		{"within the noise band", `{"create_p50_ms":60,"parallel20_ms":1400,"proxy_rps":900,"creates":10}`, 0, nil},
		{"a slower create", `{"create_p50_ms":80,"parallel20_ms":1500,"proxy_rps":1000}`, 1, []string{"create_p50_ms"}},
		{"less throughput", `{"create_p50_ms":50,"parallel20_ms":1500,"proxy_rps":500}`, 1, []string{"proxy_rps"}},
		{"faster is never a regression", `{"create_p50_ms":10,"parallel20_ms":300,"proxy_rps":5000}`, 0, nil},
		{"more transactions are not a regression", `{"create_p50_ms":50,"db_pgbench_router_tps":800,"db_pgbench_router_inside_ratio":0.8}`, 0, nil},
		{"fewer transactions are", `{"create_p50_ms":50,"db_pgbench_router_tps":300,"db_pgbench_router_inside_ratio":0.3}`, 1, []string{"db_pgbench_router_tps", "db_pgbench_router_inside_ratio"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur := writeRun(t, dir, "cur.json", c.run)
			r := runRaw(t, "", "bench", "--compare", old, "--from", cur).want(t, c.code)
			for _, key := range []string{"create_p50_ms", "parallel20_ms", "proxy_rps", "db_pgbench_router_tps", "db_pgbench_router_inside_ratio"} {
				line := lineWith(r.stdout, key)
				if line == "" {
					if !strings.Contains(c.run, key) {
						continue
					}
					t.Fatalf("no line for %s:\n%s", key, r.stdout)
				}
				if got, want := strings.Contains(line, "REGRESSED"), slices.Contains(c.regressed, key); got != want {
					t.Errorf("%s regressed = %v, want %v:\n%s", key, got, want, r.stdout)
				}
			}
			// Sample counts, the recorded build time and unmeasured (zero)
			// figures are not compared.
			for _, key := range []string{"creates", "template_build_ms", "fork_p50_ms", "db_pgbench_clients"} {
				if lineWith(r.stdout, key) != "" {
					t.Errorf("%s was compared:\n%s", key, r.stdout)
				}
			}
		})
	}
	t.Run("a stricter threshold", func(t *testing.T) {
		cur := writeRun(t, dir, "cur.json", `{"create_p50_ms":60}`)
		runRaw(t, "", "bench", "--compare", old, "--from", cur, "--threshold", "1.1").want(t, 1)
	})
	t.Run("bad input", func(t *testing.T) {
		bad := writeRun(t, dir, "bad.json", `not json`)
		none := writeRun(t, dir, "none.json", `{"other_ms":1}`)
		runRaw(t, "", "bench", "--compare", bad, "--from", old).want(t, 2)
		runRaw(t, "", "bench", "--compare", old, "--from", none).want(t, 2)
		runRaw(t, "", "bench", "--compare", filepath.Join(dir, "missing.json"), "--from", old).want(t, 2)
		runRaw(t, "", "bench", "--from", old).want(t, 2)
	})
}

func lineWith(out, key string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, key+" ") {
			return l
		}
	}
	return ""
}
