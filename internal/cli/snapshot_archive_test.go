package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/cli"
	"github.com/pandastack/pandastack/internal/objstore/file"
	"github.com/pandastack/pandastack/internal/snaparchive"
)

// snapshot export prints the key; snapshot import takes it and prints
// the new snapshot's id.
func TestSnapshotExportImport(t *testing.T) {
	objects, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	snapDir := t.TempDir()
	env := apitest.Start(t, func(c *api.Config) {
		arch := snaparchive.New(snaparchive.Config{Objects: objects, Store: c.Store, SnapshotDir: snapDir})
		t.Cleanup(arch.Close)
		c.Archive = arch
	})
	id := createSandbox(t, env)
	snap := strings.TrimSpace(run(t, env, env.Key, "", "sandbox", "snapshot", id, "--name", "s1").want(t, 0).stdout)
	os.Mkdir(filepath.Join(snapDir, snap), 0o700)
	os.WriteFile(filepath.Join(snapDir, snap, "machine.json"), []byte(`{"cpus":1}`), 0o600)

	key := strings.TrimSpace(run(t, env, env.Key, "", "snapshot", "export", snap).want(t, 0).stdout)
	if key != "snapshots/"+snap {
		t.Fatalf("export printed %q", key)
	}
	if r := run(t, env, env.OtherKey, "", "snapshot", "import", key).want(t, 1); !strings.Contains(r.stderr, "no exported snapshot") {
		t.Fatalf("another team imported the export: %q", r.stderr)
	}
	r := run(t, env, env.Key, "", "snapshot", "import", key, "--name", "s2").want(t, 0)
	// One server: the exported id is taken, so the import gets its own.
	if got := strings.TrimSpace(r.stdout); !strings.HasPrefix(got, "snap_") || got == snap {
		t.Fatalf("import printed %q", got)
	}
	if ls := run(t, env, env.Key, "", "snapshot", "ls").want(t, 0); !strings.Contains(ls.stdout, "s2") {
		t.Fatalf("the importing team lists:\n%s", ls.stdout)
	}
	if r := run(t, env, env.Key, "", "snapshot", "import", "snapshots/snap_none").want(t, 1); !strings.Contains(r.stderr, "no exported snapshot") {
		t.Fatalf("import of a missing export: %q", r.stderr)
	}
}

// doctor fails on an object store that does not answer, without
// printing its secret.
func TestDoctorChecksObjectStore(t *testing.T) {
	var out, errb strings.Builder
	cli.Main(context.Background(), []string{"doctor", "--data-dir", t.TempDir(), "--object-store",
		"s3://key:doctor-secret@bucket?endpoint=http://127.0.0.1:1"}, strings.NewReader(""), &out, &errb)
	o := out.String()
	if !strings.Contains(o, "FAIL  object store") || !strings.Contains(o, "does not answer") {
		t.Fatalf("doctor output:\n%s", o)
	}
	if strings.Contains(o+errb.String(), "doctor-secret") {
		t.Fatal("doctor printed the secret")
	}
}
