// Package spec parses custom template spec files: a small subset of the
// Dockerfile syntax users already know (FROM, RUN, COPY, ENV, WORKDIR, USER)
// plus START, the command left running in the baked snapshot, READY, the
// check that must pass before the bake, and CPUS, MEMORY and DISK, the
// template's default size.
//
// Lines ending in a backslash continue on the next line; lines whose first
// non-blank character is '#' are comments; blank lines are ignored.
// Instruction names are case-insensitive. Every error names its line.
package spec

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Op is an instruction name, upper-case.
type Op string

const (
	From    Op = "FROM"
	Run     Op = "RUN"
	Copy    Op = "COPY"
	Env     Op = "ENV"
	Workdir Op = "WORKDIR"
	User    Op = "USER"
	Start   Op = "START"
	Ready   Op = "READY"
	CPUs    Op = "CPUS"
	Memory  Op = "MEMORY"
	Disk    Op = "DISK"
)

var known = map[Op]bool{From: true, Run: true, Copy: true, Env: true, Workdir: true, User: true,
	Start: true, Ready: true, CPUs: true, Memory: true, Disk: true}

// Instruction is one parsed line (continuations joined).
type Instruction struct {
	Line int    // first line of the instruction, from 1
	Op   Op     // upper-case instruction name
	Args string // everything after the name, trimmed
	// For COPY: the source (relative to the build context, cleaned) and the
	// destination (absolute, or relative to WORKDIR).
	Src, Dst string
	// For ENV: the variables set, in the order given.
	Env [][2]string
}

// Text is the instruction as written (continuations joined): what its
// cache key and its log line are made of.
func (in Instruction) Text() string { return string(in.Op) + " " + in.Args }

// Spec is a parsed spec file.
type Spec struct {
	From         string // parent template reference: name, name:tag
	Steps        []Instruction
	Start        *Instruction
	Ready        *Instruction
	ReadyTimeout time.Duration
	CPUs         int // 0: the parent's
	MemoryMiB    int // 0: the parent's
	DiskGiB      int // 0: the parent's
}

// Error is a parse error at a line.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

func errorf(line int, format string, args ...any) *Error {
	return &Error{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// MaxSize bounds a spec file.
const MaxSize = 1 << 20

// DefaultReadyTimeout bounds the ready check when READY gives no --timeout.
const DefaultReadyTimeout = 60 * time.Second

// Parse reads a spec file.
func Parse(r io.Reader) (*Spec, error) {
	lines, err := logicalLines(r)
	if err != nil {
		return nil, err
	}
	s := &Spec{}
	for _, ln := range lines {
		name := strings.Fields(ln.text)[0]
		args := strings.TrimSpace(ln.text[len(name):])
		in := Instruction{Line: ln.n, Op: Op(strings.ToUpper(name)), Args: args}
		if !known[in.Op] {
			return nil, errorf(ln.n, "unknown instruction %q (known: %s)", name, knownList())
		}
		if s.From == "" && in.Op != From {
			return nil, errorf(ln.n, "the first instruction must be FROM <template>, not %s", in.Op)
		}
		if args == "" {
			return nil, errorf(ln.n, "%s needs an argument", in.Op)
		}
		switch in.Op {
		case From:
			if s.From != "" {
				return nil, errorf(ln.n, "FROM may appear only once")
			}
			if strings.ContainsAny(args, " \t") {
				return nil, errorf(ln.n, "FROM takes one template name, got %q", args)
			}
			s.From = args
			continue
		case Copy:
			if in.Src, in.Dst, err = copyArgs(args); err != nil {
				return nil, errorf(ln.n, "%v", err)
			}
		case Env:
			if in.Env, err = envArgs(args); err != nil {
				return nil, errorf(ln.n, "%v", err)
			}
		case Workdir:
			if !path.IsAbs(args) {
				return nil, errorf(ln.n, "WORKDIR must be an absolute path, got %q", args)
			}
			in.Args = path.Clean(args)
			if strings.TrimSpace(in.Args) != in.Args {
				// "/a /" cleans to "/a ": a name ending in a space no
				// spec line can write (lines are trimmed).
				return nil, errorf(ln.n, "WORKDIR %q ends in a directory whose name ends in a space", args)
			}
		case User:
			if strings.ContainsAny(args, " \t:") {
				return nil, errorf(ln.n, "USER takes one user name or uid, got %q", args)
			}
		case Start:
			if s.Start != nil {
				return nil, errorf(ln.n, "START may appear only once (first at line %d)", s.Start.Line)
			}
			s.Start = &in
			continue
		case Ready:
			if s.Ready != nil {
				return nil, errorf(ln.n, "READY may appear only once (first at line %d)", s.Ready.Line)
			}
			s.ReadyTimeout = DefaultReadyTimeout
			if rest, ok := strings.CutPrefix(args, "--timeout="); ok {
				v, cmd, _ := strings.Cut(rest, " ")
				sec, err := strconv.Atoi(v)
				if err != nil || sec < 1 || sec > 600 {
					return nil, errorf(ln.n, "READY --timeout must be whole seconds between 1 and 600, got %q", v)
				}
				s.ReadyTimeout = time.Duration(sec) * time.Second
				in.Args = strings.TrimSpace(cmd)
				if in.Args == "" {
					return nil, errorf(ln.n, "READY needs a command")
				}
			}
			s.Ready = &in
			continue
		case CPUs, Memory, Disk:
			n, err := strconv.Atoi(args)
			if err != nil || n < 1 {
				return nil, errorf(ln.n, "%s takes a positive whole number, got %q", in.Op, args)
			}
			switch in.Op {
			case CPUs:
				s.CPUs = n
			case Memory:
				s.MemoryMiB = n
			case Disk:
				s.DiskGiB = n
			}
			continue
		}
		if (s.Start != nil && in.Line > s.Start.Line) || (s.Ready != nil && in.Line > s.Ready.Line) {
			// Steps after START would not be in the image START runs in;
			// refuse rather than reorder silently.
			return nil, errorf(ln.n, "%s after START/READY: build steps must come before them", in.Op)
		}
		s.Steps = append(s.Steps, in)
	}
	if s.From == "" {
		return nil, errorf(1, "the spec is empty: it needs at least FROM <template>")
	}
	return s, nil
}

func knownList() string {
	var ks []string
	for k := range known {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

type logicalLine struct {
	n    int
	text string
}

// logicalLines joins continuations and drops comments and blank lines.
func logicalLines(r io.Reader) ([]logicalLine, error) {
	sc := bufio.NewScanner(io.LimitReader(r, MaxSize+1))
	sc.Buffer(make([]byte, 64<<10), MaxSize+1)
	var out []logicalLine
	var cur strings.Builder
	start, n, total := 0, 0, 0
	for sc.Scan() {
		n++
		raw := sc.Text()
		total += len(raw) + 1
		if total > MaxSize {
			return nil, errorf(n, "the spec is larger than %d bytes", MaxSize)
		}
		t := strings.TrimSpace(raw)
		if strings.HasPrefix(t, "#") || (t == "" && cur.Len() == 0) {
			continue // comments may sit inside a continued instruction too
		}
		if cur.Len() == 0 {
			start = n
		}
		cont := strings.HasSuffix(t, `\`)
		if cont {
			t = strings.TrimSpace(strings.TrimSuffix(t, `\`))
		}
		if cur.Len() > 0 && t != "" {
			cur.WriteByte(' ')
		}
		cur.WriteString(t)
		if !cont {
			if strings.HasSuffix(cur.String(), `\`) {
				// A doubled '\' continued into a blank line: the
				// instruction would end in a continuation once written
				// back, so it is refused rather than guessed at.
				return nil, errorf(start, "the instruction ends with '\\' before a blank line: remove the '\\' or continue the instruction")
			}
			if cur.Len() > 0 {
				out = append(out, logicalLine{start, cur.String()})
			}
			cur.Reset()
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	if cur.Len() > 0 {
		return nil, errorf(start, "the last instruction ends with a line continuation '\\'")
	}
	return out, nil
}

// copyArgs parses "SRC DST". SRC must stay inside the build context.
func copyArgs(args string) (src, dst string, err error) {
	f := strings.Fields(args)
	if len(f) != 2 {
		return "", "", fmt.Errorf("COPY takes a source and a destination, got %d arguments", len(f))
	}
	src, err = ContextPath(f[0])
	if err != nil {
		return "", "", fmt.Errorf("COPY %s: %w", f[0], err)
	}
	return src, f[1], nil
}

// ContextPath cleans a path relative to the build context, refusing one that
// is absolute or leads outside it. "." is the context itself.
func ContextPath(p string) (string, error) {
	c := path.Clean(p)
	if path.IsAbs(p) || strings.HasPrefix(p, `\`) || strings.HasPrefix(c, `\`) {
		return "", fmt.Errorf("absolute path: sources are relative to the build context")
	}
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path leads outside the build context")
	}
	return c, nil
}

// envArgs parses "K=V K2=V2" (values may be double-quoted) or "K V".
func envArgs(args string) ([][2]string, error) {
	if k, v, ok := strings.Cut(args, " "); ok && !strings.Contains(k, "=") {
		if err := checkEnvKey(k); err != nil {
			return nil, err
		}
		return [][2]string{{k, strings.TrimSpace(v)}}, nil
	}
	var out [][2]string
	rest := args
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		k, after, ok := strings.Cut(rest, "=")
		if !ok {
			return nil, fmt.Errorf("ENV expects KEY=VALUE, got %q", rest)
		}
		if err := checkEnvKey(k); err != nil {
			return nil, err
		}
		var v string
		if strings.HasPrefix(after, `"`) {
			end := strings.Index(after[1:], `"`)
			if end < 0 {
				return nil, fmt.Errorf("ENV %s: unterminated quote", k)
			}
			v, rest = after[1:1+end], after[2+end:]
		} else {
			v, rest, _ = strings.Cut(after, " ")
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func checkEnvKey(k string) error {
	if k == "" {
		return fmt.Errorf("ENV: empty variable name")
	}
	for i, c := range k {
		if !(c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9')) {
			return fmt.Errorf("ENV: invalid variable name %q", k)
		}
	}
	return nil
}
