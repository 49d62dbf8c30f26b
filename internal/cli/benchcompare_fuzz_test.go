package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzBenchCompare reads two arbitrary `bench --json` files as `pandastack
// bench --compare` does: exit 2 with an error for a file that is not a run
// (or two runs with nothing in common), else one line per figure the two
// share, in key order, and exit 1 exactly when one of them is marked
// regressed — a figure whose ratio is past the threshold.
func FuzzBenchCompare(f *testing.F) {
	run := `{"creates":20,"create_p50_ms":812.5,"create_p99_ms":1500,"exec_p50_ms":3.2,"proxy_rps":950,"template_build_ms":61000}`
	f.Add([]byte(run), []byte(`{"creates":20,"create_p50_ms":1200,"create_p99_ms":1400,"exec_p50_ms":3.1,"proxy_rps":500}`))
	f.Add([]byte(run), []byte(run))
	f.Add([]byte(`{"a":1}`), []byte(`{"b":1}`))
	f.Add([]byte(`[1,2]`), []byte(`null`))
	f.Add([]byte(`{"a":-1,"b":1e308}`), []byte(`{"a":1,"b":1e-308}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, old, cur []byte) {
		const threshold = 1.3
		oldPath := filepath.Join(dir, "old.json")
		if err := os.WriteFile(oldPath, old, 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := benchCompare(&streams{out: &out, err: &errOut}, oldPath, cur, threshold)
		o, oerr := benchFigures(old)
		c, cerr := benchFigures(cur)
		if oerr != nil || cerr != nil {
			if code != 2 || !strings.HasPrefix(errOut.String(), "error: ") {
				t.Fatalf("bad file: exit %d, stderr %q", code, errOut.String())
			}
			return
		}
		ds := compareBench(o, c, threshold)
		if len(ds) == 0 {
			if code != 2 {
				t.Fatalf("no common figure: exit %d", code)
			}
			return
		}
		regressed := false
		for i, d := range ds {
			if _, ok := o[d.Key]; !ok {
				t.Fatalf("figure %q is not in the stored run", d.Key)
			}
			if _, ok := c[d.Key]; !ok {
				t.Fatalf("figure %q is not in this run", d.Key)
			}
			if i > 0 && ds[i-1].Key >= d.Key {
				t.Fatalf("figures out of order: %q then %q", ds[i-1].Key, d.Key)
			}
			if d.Regressed != (d.Ratio > threshold) {
				t.Fatalf("%q: ratio %v, regressed %v", d.Key, d.Ratio, d.Regressed)
			}
			regressed = regressed || d.Regressed
		}
		if want := map[bool]int{false: 0, true: 1}[regressed]; code != want {
			t.Fatalf("exit %d, want %d", code, want)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) < len(ds)+1 || !slices.ContainsFunc(lines[:1], func(l string) bool { return strings.HasPrefix(l, "figure") }) {
			t.Fatalf("output:\n%s", out.String())
		}
	})
}
