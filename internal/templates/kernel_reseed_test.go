package templates

import (
	"os"
	"path/filepath"
	"testing"
)

// A kernel captured in a template shares its `random` state with every
// clone. When the guest agent publishes a new generation (after a restore),
// the next run starts from a fresh seed; while the generation stays, a
// user's own seeding is left alone.
func TestKernelReseedsAfterRestore(t *testing.T) {
	gen := filepath.Join(t.TempDir(), "generation")
	publish := func(tok string) {
		t.Helper()
		if err := os.WriteFile(gen, []byte(tok+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	publish("bake")
	addr := startKernelEnv(t, "PANDASTACK_GENERATION_FILE="+gen)
	value := func(code string) string {
		t.Helper()
		_, stderr, results, errEv, _ := execute(t, addr, code)
		if errEv != nil || len(results) != 1 {
			t.Fatalf("run %q: error %+v, results %+v, stderr %q", code, errEv, results, stderr)
		}
		return results[0].Text
	}

	// Same generation: a seeded generator keeps its sequence across runs.
	execute(t, addr, "import random, tempfile\nrandom.seed(7)")
	seeded := value("random.random()")
	execute(t, addr, "random.seed(7)")
	if v := value("random.random()"); v != seeded {
		t.Fatalf("without a restore the kernel reseeded: %s after seed(7), want %s", v, seeded)
	}
	execute(t, addr, "tempfile._get_candidate_names().rng.seed(7)")
	names := value("tempfile._get_candidate_names().rng.random()")

	// A restore: the state (seed 7) is what every clone has; the next run
	// must not continue it.
	execute(t, addr, "random.seed(7)\ntempfile._get_candidate_names().rng.seed(7)")
	publish("clone-1")
	if v := value("random.random()"); v == seeded {
		t.Fatalf("after a new generation random.random() still gave %s, the snapshot's sequence", v)
	}
	if v := value("tempfile._get_candidate_names().rng.random()"); v == names {
		t.Fatalf("after a new generation tempfile's names still came from the snapshot's generator")
	}
}
