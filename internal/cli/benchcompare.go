package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// benchDelta is one figure of a run compared with the same figure of a
// stored run.
type benchDelta struct {
	Key      string
	Old, New float64
	// Ratio is New/Old for figures where more is worse (latencies), and
	// Old/New where more is better (throughput), so above 1 is always a
	// regression.
	Ratio     float64
	Regressed bool
}

// higherIsBetter reports whether a larger number of figure k is an
// improvement: throughput (requests or transactions a second) and a
// throughput's share of its floor (pgbench through the router over inside
// the machine); every other figure is a time or a time over its floor.
func higherIsBetter(k string) bool {
	return strings.HasSuffix(k, "_rps") || strings.HasSuffix(k, "_tps") || strings.HasSuffix(k, "_inside_ratio")
}

// notCompared reports whether k describes the run rather than measures
// it: sample counts, how long or with how many clients a load ran, the
// recorded build time.
func notCompared(k string) bool {
	switch k {
	case "n", "creates", "template_build_ms":
		return true
	}
	for _, s := range []string{"_clients", "_rounds", "_seconds", "_runs"} {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

// benchFigures reads the numeric figures of a `bench --json` object: every
// number but the run's description (sample counts, the recorded build
// time). Keys with a zero value were not measured.
func benchFigures(raw []byte) (map[string]float64, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a bench --json object: %w", err)
	}
	out := map[string]float64{}
	for k, v := range m {
		if f, ok := v.(float64); ok && f != 0 && !notCompared(k) {
			out[k] = f
		}
	}
	return out, nil
}

// compareBench compares two runs' figures, key by key, in key order; a
// figure that only one run has is left out. threshold is the ratio past
// which a figure counts as a regression (e.g. 1.3: 30 % worse).
func compareBench(old, cur map[string]float64, threshold float64) []benchDelta {
	var out []benchDelta
	for k, o := range old {
		n, ok := cur[k]
		if !ok {
			continue
		}
		r := n / o
		if higherIsBetter(k) {
			r = o / n
		}
		out = append(out, benchDelta{Key: k, Old: o, New: n, Ratio: r, Regressed: r > threshold})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// printBenchDeltas writes one line per figure and reports whether any
// regressed.
func printBenchDeltas(w io.Writer, ds []benchDelta, threshold float64) bool {
	bad := 0
	fmt.Fprintf(w, "%-28s %12s %12s %8s\n", "figure", "stored", "now", "ratio")
	for _, d := range ds {
		mark := ""
		if d.Regressed {
			mark = fmt.Sprintf("  REGRESSED (> %.2f)", threshold)
			bad++
		}
		fmt.Fprintf(w, "%-28s %12.3f %12.3f %8.2f%s\n", d.Key, d.Old, d.New, d.Ratio, mark)
	}
	if bad > 0 {
		fmt.Fprintf(w, "\n%d of %d figures regressed past %.2f× the stored run\n", bad, len(ds), threshold)
	} else {
		fmt.Fprintf(w, "\nno figure regressed past %.2f× the stored run (%d compared)\n", threshold, len(ds))
	}
	return bad > 0
}

// benchCompare compares the run cur (a bench --json object) with the run
// stored in the file oldPath; it exits 1 past the threshold, 2 on a bad
// file.
func benchCompare(s *streams, oldPath string, cur []byte, threshold float64) int {
	raw, err := os.ReadFile(oldPath)
	if err != nil {
		fmt.Fprintf(s.err, "error: read stored run: %v\n", err)
		return 2
	}
	old, err := benchFigures(raw)
	if err != nil {
		fmt.Fprintf(s.err, "error: %s: %v\n", oldPath, err)
		return 2
	}
	now, err := benchFigures(cur)
	if err != nil {
		fmt.Fprintf(s.err, "error: this run: %v\n", err)
		return 2
	}
	ds := compareBench(old, now, threshold)
	if len(ds) == 0 {
		fmt.Fprintf(s.err, "error: the two runs have no figure in common (%s)\n", strings.Join(keys(old), ", "))
		return 2
	}
	if printBenchDeltas(s.out, ds, threshold) {
		return 1
	}
	return 0
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
