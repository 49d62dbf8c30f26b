package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapture(t *testing.T) {
	tests := []struct {
		name      string
		limit     int
		writes    []string
		want      string
		truncated bool
	}{
		{"empty", 10, nil, "", false},
		{"fits", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly the limit", 10, []string{"0123456789"}, "0123456789", false},
		{"head and tail", 10, []string{"0123456789", "abcdefghij"}, "01234" + "\n[... output truncated: 10 of 20 bytes omitted; only the first and last 0 KB of each stream are returned ...]\n" + "fghij", true},
		{"many small writes", 4, strings.Split(strings.Repeat("x", 1000)+"end", ""), "xx" + "\n[... output truncated: 999 of 1003 bytes omitted; only the first and last 0 KB of each stream are returned ...]\n" + "nd", true},
		{"runes are not cut", 6, []string{"ééééé", "ééééé"}, "é" + "\n[... output truncated: 16 of 20 bytes omitted; only the first and last 0 KB of each stream are returned ...]\n" + "é", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapture(tt.limit)
			for _, w := range tt.writes {
				c.write([]byte(w))
			}
			got, truncated := c.text()
			if got != tt.want || truncated != tt.truncated {
				t.Errorf("text() = %q, %v; want %q, %v", got, truncated, tt.want, tt.truncated)
			}
			if !utf8.ValidString(got) {
				t.Errorf("%q is not valid UTF-8", got)
			}
			if len(c.tail) > 2*tt.limit {
				t.Errorf("tail holds %d bytes", len(c.tail))
			}
		})
	}
}
