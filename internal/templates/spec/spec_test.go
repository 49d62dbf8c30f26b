package spec

import (
	"strings"
	"testing"
	"time"
)

func TestParseEveryInstruction(t *testing.T) {
	src := `# a web app
FROM minimal:v2
CPUS 2
MEMORY 768
DISK 3
ENV GREETING=hello NAME="two words"
env PORT 8080
WORKDIR /srv/app/../app
COPY ./app.py app.py
RUN apt-get install -y \
    curl \
  # a comment inside a continued instruction
    git
USER nobody
START python3 -m http.server $PORT
READY --timeout=30 curl -fs localhost:8080
`
	s, err := Parse(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	if s.From != "minimal:v2" || s.CPUs != 2 || s.MemoryMiB != 768 || s.DiskGiB != 3 {
		t.Fatalf("header: %+v", s)
	}
	want := []struct {
		op   Op
		line int
		args string
	}{
		{Env, 6, `GREETING=hello NAME="two words"`},
		{Env, 7, "PORT 8080"},
		{Workdir, 8, "/srv/app"},
		{Copy, 9, "./app.py app.py"},
		{Run, 10, "apt-get install -y curl git"},
		{User, 14, "nobody"},
	}
	if len(s.Steps) != len(want) {
		t.Fatalf("steps: %+v", s.Steps)
	}
	for i, w := range want {
		g := s.Steps[i]
		if g.Op != w.op || g.Line != w.line || g.Args != w.args {
			t.Errorf("step %d = %s line %d %q, want %s line %d %q", i, g.Op, g.Line, g.Args, w.op, w.line, w.args)
		}
	}
	if e := s.Steps[0].Env; len(e) != 2 || e[0] != [2]string{"GREETING", "hello"} || e[1] != [2]string{"NAME", "two words"} {
		t.Errorf("ENV parsed as %q", e)
	}
	if e := s.Steps[1].Env; len(e) != 1 || e[0] != [2]string{"PORT", "8080"} {
		t.Errorf("ENV K V parsed as %q", e)
	}
	if c := s.Steps[3]; c.Src != "app.py" || c.Dst != "app.py" {
		t.Errorf("COPY parsed as %q -> %q", c.Src, c.Dst)
	}
	if s.Start == nil || s.Start.Args != "python3 -m http.server $PORT" || s.Start.Line != 15 {
		t.Errorf("START: %+v", s.Start)
	}
	if s.Ready == nil || s.Ready.Args != "curl -fs localhost:8080" || s.ReadyTimeout != 30*time.Second {
		t.Errorf("READY: %+v %v", s.Ready, s.ReadyTimeout)
	}
}

func TestParseDefaults(t *testing.T) {
	s, err := Parse(strings.NewReader("FROM base\nREADY true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.ReadyTimeout != DefaultReadyTimeout || s.Start != nil || len(s.Steps) != 0 || s.CPUs != 0 {
		t.Fatalf("%+v", s)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		name, src string
		line      int
		msg       string
	}{
		{"unknown instruction", "FROM base\n\nEXPOSE 80\n", 3, `unknown instruction "EXPOSE"`},
		{"FROM not first", "# c\nRUN true\n", 2, "first instruction must be FROM"},
		{"empty spec", "# nothing\n", 1, "needs at least FROM"},
		{"FROM twice", "FROM a\nFROM b\n", 2, "only once"},
		{"FROM with spaces", "FROM a b\n", 1, "one template name"},
		{"RUN without command", "FROM a\nRUN\n", 2, "needs an argument"},
		{"COPY one arg", "FROM a\nCOPY x\n", 2, "source and a destination"},
		{"COPY parent dir", "FROM a\nCOPY ../secret /x\n", 2, "outside the build context"},
		{"COPY sneaky parent", "FROM a\nCOPY sub/../../x /x\n", 2, "outside the build context"},
		{"COPY absolute", "FROM a\nCOPY /etc/passwd /x\n", 2, "absolute path"},
		{"ENV bad name", "FROM a\nENV 1A=b\n", 2, "invalid variable name"},
		{"ENV unterminated", "FROM a\nENV A=\"b\n", 2, "unterminated quote"},
		{"WORKDIR relative", "FROM a\nWORKDIR app\n", 2, "absolute path"},
		{"USER with group", "FROM a\nUSER a:b\n", 2, "one user name"},
		{"START twice", "FROM a\nSTART x\nSTART y\n", 3, "only once"},
		{"READY bad timeout", "FROM a\nREADY --timeout=0 true\n", 2, "--timeout"},
		{"READY timeout no cmd", "FROM a\nREADY --timeout=5\n", 2, "needs a command"},
		{"CPUS not a number", "FROM a\nCPUS two\n", 2, "positive whole number"},
		{"step after START", "FROM a\nSTART x\nRUN y\n", 3, "after START"},
		{"dangling continuation", "FROM a\nRUN a \\\n", 2, "continuation"},
		{"a doubled backslash before a blank line", "FROM a\nRUN echo \\\\\n\nRUN b\n", 2, "before a blank line"},
		{"continued line error", "FROM a\nRUN a \\\n b\nBOGUS\n", 4, "unknown instruction"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.src))
			pe, ok := err.(*Error)
			if !ok {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if pe.Line != c.line || !strings.Contains(pe.Msg, c.msg) {
				t.Fatalf("err = %v, want line %d containing %q", err, c.line, c.msg)
			}
		})
	}
}

func TestContextPath(t *testing.T) {
	for p, want := range map[string]string{".": ".", "./a/b": "a/b", "a/../b": "b", "a//b/": "a/b"} {
		if got, err := ContextPath(p); err != nil || got != want {
			t.Errorf("ContextPath(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
	for _, p := range []string{"..", "../x", "a/../../x", "/abs"} {
		if _, err := ContextPath(p); err == nil {
			t.Errorf("ContextPath(%q) accepted", p)
		}
	}
}
