package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// fail prints err on stderr and returns 1. API errors print as
// "error: CODE: MESSAGE".
func fail(s *streams, err error) int {
	var ae *sdk.APIError
	if errors.As(err, &ae) {
		fmt.Fprintf(s.err, "error: %s: %s\n", ae.Code, ae.Message)
	} else {
		fmt.Fprintf(s.err, "error: %v\n", err)
	}
	return 1
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) { fmt.Fprintln(t.tw, strings.Join(cols, "\t")) }

func (t *table) flush() { t.tw.Flush() }

// when formats a time for tables (UTC, to the second).
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}

// formatKV formats a map as sorted k=v pairs.
func formatKV(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
