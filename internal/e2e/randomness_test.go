package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	// numpy and random are already imported in the kernel baked into the
	// template.
	kernelClones(t, teamClient(t, "rng-code"), "code-interpreter", "random", "numpy")
}

// The same with a kernel of a custom template's START (whose generators
// were imported before the bake): what a template of one's own runs. Only
// `random`: base has no numpy. Lighter than code-interpreter, whose bake
// imports pandas and matplotlib.
func TestCapturedKernelClonesDoNotShareRandomness(t *testing.T) {
	kernel, err := os.ReadFile(filepath.Join("..", "templates", "kernel", "kernel.py"))
	if err != nil {
		t.Fatal(err)
	}
	spec := `FROM base
COPY kernel.py /opt/kernel.py
ENV PANDASTACK_KERNEL_PRELOAD=random
START python3 /opt/kernel.py 49999
READY --timeout=120 python3 -c "import socket; socket.create_connection(('127.0.0.1', 49999), 1).close()"
`
	_, dir := writeContext(t, spec, map[string]string{"kernel.py": string(kernel)})
	if _, _, err := buildCustom(t, "rng-kernel", spec, dir); err != nil {
		t.Fatalf("build: %v", err)
	}
	kernelClones(t, main.client(main.admin), "rng-kernel", "random", "openssl")
}

// kernelClones runs, through run_code, one draw of each generator (random,
// numpy) in ten sandboxes from template, a fork of the last and that fork's
// parent: all must differ. Then the user seeds them and forks: the fork
// goes on with the parent's sequence.
func kernelClones(t *testing.T, c *sdk.Client, template string, gens ...string) {
	ctx := context.Background()
	draws := map[string]string{"random": "random.random()", "numpy": "float(numpy.random.rand())", "openssl": "ssl.RAND_bytes(8).hex()"}
	seeds := map[string]string{"random": "random.seed(3)", "numpy": "numpy.random.seed(3)"} // OpenSSL's: none a user sets
	modules := map[string]string{"random": "random", "numpy": "numpy", "openssl": "ssl"}
	var seedCode, imports, seeded []string
	for _, g := range gens {
		imports = append(imports, modules[g])
		if seeds[g] != "" {
			seedCode, seeded = append(seedCode, seeds[g]), append(seeded, g)
		}
	}
	code := "import " + strings.Join(imports, ", ") + "\nprint(" + strings.Join(exprsOf(draws, gens), ", ") + ")"
	seen := map[string]distinct{}
	for _, g := range gens {
		seen[g] = distinct{}
	}
	sample := func(sb *sdk.Sandbox, where string) {
		t.Helper()
		ex := runCode(t, sb, code, sdk.CodeOptions{})
		f := strings.Fields(ex.Stdout)
		if ex.Error != nil || len(f) != len(gens) {
			t.Fatalf("%s: run_code gave stdout %q, error %v", where, ex.Stdout, ex.Error)
		}
		for i, g := range gens {
			seen[g].add(t, draws[g], where, f[i])
		}
	}
	var last *sdk.Sandbox
	for i := 0; i < 10; i++ {
		sb := newSandbox(t, c, sdk.CreateSandboxParams{Template: template})
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

	// A generator the user seeded keeps its sequence: a fork goes on with
	// the parent's, as after os.fork.
	runCode(t, last, "import "+strings.Join(seeded, ", ")+"\n"+strings.Join(seedCode, "\n"), sdk.CodeOptions{})
	seededKid, err := last.Fork(ctx)
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	t.Cleanup(func() { _ = seededKid.Kill(context.Background()) })
	code = "import " + strings.Join(seeded, ", ") + "\nprint(" + strings.Join(exprsOf(draws, seeded), ", ") + ")"
	want := runCode(t, last, code, sdk.CodeOptions{}).Stdout
	if got := runCode(t, seededKid, code, sdk.CodeOptions{}).Stdout; got != want {
		t.Errorf("after %s a fork drew %q, its parent %q: the user's seed was overridden", strings.Join(seedCode, "; "), got, want)
	}
}

// exprsOf is the print arguments that draw once from each of gens.
func exprsOf(draws map[string]string, gens []string) []string {
	var out []string
	for _, g := range gens {
		out = append(out, "repr("+draws[g]+")")
	}
	return out
}
