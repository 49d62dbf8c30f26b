package spec

import (
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse parses arbitrary spec files (a tenant uploads them). Every
// error names a line of the file; every accepted spec keeps its promises
// (COPY sources inside the context, absolute WORKDIRs, valid ENV names,
// steps before START/READY) and prints back to a spec that parses to the
// same instructions.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"FROM base\n",
		"FROM base\nRUN echo hi > /hello.txt\n", // as the e2e custom-template test sends
		"FROM minimal:v2\nCPUS 2\nMEMORY 768\nDISK 3\nENV GREETING=hello NAME=\"two words\"\nenv PORT 8080\n" +
			"WORKDIR /srv/app/../app\nCOPY ./app.py app.py\nRUN apt-get install -y \\\n  curl \\\n  # c\n  git\n" +
			"USER nobody\nSTART python3 -m http.server $PORT\nREADY --timeout=30 curl -fs localhost:8080\n",
		"FROM base\nCOPY ../x /x\n",
		"FROM base\nRUN a \\\n",
		"FROM base\nSTART a\nRUN b\n",
		"FROM base\nENV A=\"unterminated\n",
		"FROM base\nREADY --timeout=0 true\n",
		"\n# only a comment\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Parse(strings.NewReader(src))
		lines := strings.Count(src, "\n") + 1
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				if len(src) <= MaxSize {
					t.Fatalf("error without a line: %v", err)
				}
				return
			}
			if pe.Line < 1 || pe.Line > lines || pe.Msg == "" {
				t.Fatalf("error %q names line %d of a %d-line file", pe.Msg, pe.Line, lines)
			}
			return
		}
		checkSpec(t, s)
		again, err := Parse(strings.NewReader(print(s)))
		if err != nil {
			t.Fatalf("printed spec does not parse: %v\n%s", err, print(s))
		}
		if a, b := stripLines(s), stripLines(again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip:\n%+v\n%+v\nprinted:\n%s", a, b, print(s))
		}
	})
}

// checkSpec asserts what the builder relies on in a parsed spec.
func checkSpec(t *testing.T, s *Spec) {
	t.Helper()
	if s.From == "" || strings.ContainsAny(s.From, " \t") {
		t.Fatalf("FROM %q", s.From)
	}
	last := 0
	for _, in := range s.Steps {
		if in.Line <= last {
			t.Fatalf("steps out of order: line %d after %d", in.Line, last)
		}
		last = in.Line
		if (s.Start != nil && in.Line > s.Start.Line) || (s.Ready != nil && in.Line > s.Ready.Line) {
			t.Fatalf("step at line %d after START/READY", in.Line)
		}
		if in.Args == "" {
			t.Fatalf("%s without an argument", in.Op)
		}
		switch in.Op {
		case Copy:
			if c, err := ContextPath(in.Src); err != nil || c != in.Src || path.IsAbs(in.Src) || in.Src == ".." || strings.HasPrefix(in.Src, "../") {
				t.Fatalf("COPY source %q leaves the context", in.Src)
			}
		case Workdir:
			if !path.IsAbs(in.Args) || path.Clean(in.Args) != in.Args {
				t.Fatalf("WORKDIR %q", in.Args)
			}
		case Env:
			for _, kv := range in.Env {
				if checkEnvKey(kv[0]) != nil {
					t.Fatalf("ENV name %q", kv[0])
				}
			}
		case Run, User:
		default:
			t.Fatalf("%s listed as a build step", in.Op)
		}
	}
	if s.Ready != nil && (s.ReadyTimeout < 1e9 || s.ReadyTimeout > 600e9 || s.Ready.Args == "") {
		t.Fatalf("READY %q timeout %v", s.Ready.Args, s.ReadyTimeout)
	}
	if s.CPUs < 0 || s.MemoryMiB < 0 || s.DiskGiB < 0 {
		t.Fatalf("sizes %d %d %d", s.CPUs, s.MemoryMiB, s.DiskGiB)
	}
}

// print writes s back as a spec file.
func print(s *Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", s.From)
	for op, n := range map[Op]int{CPUs: s.CPUs, Memory: s.MemoryMiB, Disk: s.DiskGiB} {
		if n > 0 {
			fmt.Fprintf(&b, "%s %d\n", op, n)
		}
	}
	for _, in := range s.Steps {
		fmt.Fprintf(&b, "%s\n", in.Text())
	}
	if s.Start != nil {
		fmt.Fprintf(&b, "%s\n", s.Start.Text())
	}
	if s.Ready != nil {
		fmt.Fprintf(&b, "READY --timeout=%d %s\n", int(s.ReadyTimeout.Seconds()), s.Ready.Args)
	}
	return b.String()
}

// stripLines is s without line numbers and READY's default timeout
// spelled out, for comparing a spec with its printed form.
func stripLines(s *Spec) Spec {
	out := *s
	out.Steps = nil
	for _, in := range s.Steps {
		in.Line = 0
		out.Steps = append(out.Steps, in)
	}
	if s.Start != nil {
		st := *s.Start
		st.Line = 0
		out.Start = &st
	}
	if s.Ready != nil {
		r := *s.Ready
		r.Line = 0
		out.Ready = &r
	}
	return out
}
