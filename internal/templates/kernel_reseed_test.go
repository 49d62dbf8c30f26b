package templates

import (
	"os"
	"path/filepath"
	"testing"
)

// A kernel captured in a template shares its `random` state with every
// clone. When the guest agent publishes a new generation (after a restore),
// the next run starts from a fresh seed; while the generation stays, the
// sequence goes on. A generator the user seeded keeps its sequence.
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
	run := func(code string) {
		t.Helper()
		if _, stderr, _, errEv, _ := execute(t, addr, code); errEv != nil || stderr != "" {
			t.Fatalf("run %q: error %+v, stderr %q", code, errEv, stderr)
		}
	}
	// snapshotState puts the generators in a known state the way the bake
	// does (not through the user's seeding functions): every clone of the
	// snapshot would start from it.
	const snapshotState = "random._inst.seed(7); tempfile._get_candidate_names().rng.seed(7)"
	run("import random, tempfile")
	run(snapshotState)
	want := value("random.random()")

	// Same generation: nothing is reseeded.
	run(snapshotState)
	if v := value("random.random()"); v != want {
		t.Fatalf("without a restore the kernel reseeded: %s, want %s", v, want)
	}

	// A restore: the next run must not continue the snapshot's sequences.
	run(snapshotState)
	publish("clone-1")
	if v := value("random.random()"); v == want {
		t.Fatalf("after a new generation random.random() still gave %s, the snapshot's sequence", v)
	}
	run("tempfile._get_candidate_names().rng.seed(7)")
	seven := value("tempfile._get_candidate_names().rng.random()")
	run("tempfile._get_candidate_names().rng.seed(7)")
	publish("clone-2")
	if v := value("tempfile._get_candidate_names().rng.random()"); v == seven {
		t.Fatalf("after a new generation tempfile's names still came from the snapshot's generator")
	}

	// The user's own seed survives a restore (say an auto-hibernate and wake).
	run("random.seed(42)")
	seeded := value("random.random()")
	run("random.seed(42)")
	publish("woken")
	if v := value("random.random()"); v != seeded {
		t.Fatalf("a restore reseeded the generator the user seeded: %s, want %s", v, seeded)
	}
	// random.seed() asks for OS entropy: the generator is no longer the
	// user's fixed sequence and is reseeded after the next restore again.
	run("random.seed()\nrandom._inst.seed(7)")
	seven = value("random.random()")
	run("random._inst.seed(7)")
	publish("clone-3")
	if v := value("random.random()"); v == seven {
		t.Fatalf("after seed() and a restore random.random() gave the snapshot's %s", v)
	}
}
