package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// Every sandbox starts from a copy of one memory snapshot: a template's, a
// running sandbox's (fork) or a saved one's (snapshot). None of them may
// share random streams with another: not the kernel's, and not those of
// processes captured running in the snapshot (the code-interpreter kernel's
// `random` and `numpy.random`).

// urandom reads 32 bytes of the guest's /dev/urandom, in hex.
func urandom(t *testing.T, sb *sdk.Sandbox) string {
	t.Helper()
	r, err := sb.Exec(context.Background(), "od -An -N32 -tx1 /dev/urandom | tr -d ' \\n'", sdk.ExecOptions{})
	if err != nil {
		t.Fatalf("read /dev/urandom in %s: %v", sb.ID, err)
	}
	out := strings.TrimSpace(string(r.Stdout))
	if r.ExitCode != 0 || len(out) != 64 {
		t.Fatalf("read /dev/urandom in %s: exit %d, stdout %q, stderr %q", sb.ID, r.ExitCode, r.Stdout, r.Stderr)
	}
	return out
}

// distinct fails the test when two sandboxes gave the same value.
type distinct map[string]string // value → where it came from

func (d distinct) add(t *testing.T, what, where, v string) {
	t.Helper()
	if prev, ok := d[v]; ok {
		t.Errorf("%s: %s and %s both gave %s", what, prev, where, v)
	}
	d[v] = where
}

func TestClonesDoNotShareKernelRandomness(t *testing.T) {
	ctx := context.Background()
	c := teamClient(t, "rng-kernel")
	seen := distinct{}

	// Ten creates from one template.
	for i := 0; i < 10; i++ {
		sb := newSandbox(t, c, sdk.CreateSandboxParams{})
		seen.add(t, "/dev/urandom", fmt.Sprintf("create %d (%s)", i, sb.ID), urandom(t, sb))
		if err := sb.Kill(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Two forks of one sandbox, and the parent after them.
	parent := newSandbox(t, c, sdk.CreateSandboxParams{})
	var kids []*sdk.Sandbox
	for i := 0; i < 2; i++ {
		kid, err := parent.Fork(ctx)
		if err != nil {
			t.Fatalf("fork: %v", err)
		}
		t.Cleanup(func() { _ = kid.Kill(context.Background()) })
		kids = append(kids, kid)
	}
	for i, kid := range kids {
		seen.add(t, "/dev/urandom", fmt.Sprintf("fork %d (%s)", i, kid.ID), urandom(t, kid))
	}
	seen.add(t, "/dev/urandom", "the forks' parent", urandom(t, parent))

	// Two sandboxes restored from one snapshot.
	sn, err := parent.Snapshot(ctx, "rng")
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { _ = c.DeleteSnapshot(context.Background(), sn.ID) })
	for i := 0; i < 2; i++ {
		sb := newSandbox(t, c, sdk.CreateSandboxParams{Snapshot: sn.ID})
		seen.add(t, "/dev/urandom", fmt.Sprintf("restore %d of snapshot %s (%s)", i, sn.ID, sb.ID), urandom(t, sb))
	}
}

func TestCodeInterpreterClonesDoNotShareRandomness(t *testing.T) {
	needTemplate(t, "code-interpreter")
	ctx := context.Background()
	c := teamClient(t, "rng-code")
	// One run in each sandbox; numpy and random are already imported in
	// the kernel baked into the template.
	const code = "import random, numpy\nprint(repr(random.random()), repr(float(numpy.random.rand())))"
	pyRandom, npRandom := distinct{}, distinct{}
	sample := func(sb *sdk.Sandbox, where string) {
		t.Helper()
		ex := runCode(t, sb, code, sdk.CodeOptions{})
		f := strings.Fields(ex.Stdout)
		if ex.Error != nil || len(f) != 2 {
			t.Fatalf("%s: run_code gave stdout %q, error %v", where, ex.Stdout, ex.Error)
		}
		pyRandom.add(t, "random.random()", where, f[0])
		npRandom.add(t, "numpy.random.rand()", where, f[1])
	}
	var last *sdk.Sandbox
	for i := 0; i < 10; i++ {
		sb := newSandbox(t, c, sdk.CreateSandboxParams{Template: "code-interpreter"})
		sample(sb, fmt.Sprintf("create %d (%s)", i, sb.ID))
		if last != nil {
			if err := last.Kill(ctx); err != nil {
				t.Fatal(err)
			}
		}
		last = sb
	}
	// A fork's kernel and its parent's go on from one state.
	kid, err := last.Fork(ctx)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	t.Cleanup(func() { _ = kid.Kill(context.Background()) })
	sample(kid, "fork ("+kid.ID+")")
	sample(last, "the fork's parent ("+last.ID+")")
}
