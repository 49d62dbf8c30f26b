package api

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestLineWriter(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"whole lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"split across writes", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"CRLF", []string{"a\r\n"}, []string{"a"}},
		{"final partial line", []string{"a\nb"}, []string{"a", "b"}},
		{"empty lines kept", []string{"\n\n"}, []string{"", ""}},
		{"overlong line split", []string{strings.Repeat("x", maxLogLine+3) + "\n"}, []string{strings.Repeat("x", maxLogLine), "xxx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			lw := &lineWriter{emit: func(s string) error { got = append(got, s); return nil }}
			for _, w := range tt.writes {
				if n, err := lw.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			lw.Close()
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("lines %q, want %q", abbrev(got), abbrev(tt.want))
			}
			if _, err := lw.Write([]byte("late\n")); err == nil {
				t.Fatal("write after Close succeeded")
			}
		})
	}
	t.Run("emit failure stops writes", func(t *testing.T) {
		gone := errors.New("client gone")
		lw := &lineWriter{emit: func(string) error { return gone }}
		if _, err := lw.Write([]byte("a\n")); !errors.Is(err, gone) {
			t.Fatalf("err %v", err)
		}
		if _, err := lw.Write([]byte("b\n")); !errors.Is(err, gone) {
			t.Fatalf("second write err %v", err)
		}
	})
}

// abbrev shortens long lines for failure messages.
func abbrev(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 20 {
			l = l[:10] + "..." + l[len(l)-5:] + " (" + strconv.Itoa(len(l)) + " bytes)"
		}
		out[i] = l
	}
	return out
}
