package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/objstore/objstoretest"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// Snapshots survive the host's data: a server started with an S3 object
// store (a real versitygw on loopback) exports each new snapshot; with the
// snapshot's local files wiped, a create fetches them back; a second
// server on a new data dir imports the export and restores it — disk and
// process memory as they were.
func TestSnapshotsInObjectStorage(t *testing.T) {
	ctx := context.Background()
	g := objstoretest.StartVersityGW(t, "pandastack")
	url := fmt.Sprintf("s3://%s:%s@pandastack/cluster?endpoint=%s", g.AccessKey, g.SecretKey, g.Endpoint)

	t.Run("a store refusing the credentials stops the start", func(t *testing.T) {
		dir := t.TempDir()
		bad := strings.Replace(url, g.SecretKey, "not-the-secret", 1)
		_, err := startServer(dir, "--object-store", bad)
		if err == nil || !strings.Contains(err.Error(), "refused the credentials") {
			t.Fatalf("start with a wrong secret: %v", err)
		}
		if strings.Contains(err.Error(), "not-the-secret") {
			t.Fatalf("the server printed the secret: %v", err)
		}
		_, err = startServer(t.TempDir(), "--object-store", "s3://pandastack/x?endpoint=http://127.0.0.1:1")
		if err == nil || !strings.Contains(err.Error(), "does not answer") {
			t.Fatalf("start with a store that does not answer: %v", err)
		}
	})

	a, dirA := newTestServer(t, "ps-e2e-obj-a-", "--object-store", url, "--kill-on-exit")
	t.Cleanup(a.stop)
	c := a.client(a.admin)
	src := newSandbox(t, c, sdk.CreateSandboxParams{})
	pid, v := startMemProcess(t, src)
	if _, err := src.Files().Write(ctx, "/root/kept.txt", []byte("written before the wipe")); err != nil {
		t.Fatal(err)
	}
	sn, err := src.Snapshot(ctx, "offsite")
	if err != nil {
		t.Fatal(err)
	}
	_ = src.Kill(ctx)

	var exported sdk.SnapshotInfo
	eventually(t, 5*time.Minute, "the new snapshot exported in the background", func() bool {
		list, _ := c.ListSnapshots(ctx)
		for _, s := range list {
			if s.ID == sn.ID && s.ExportError != "" {
				t.Fatalf("export failed: %s", s.ExportError)
			}
			if s.ID == sn.ID && s.ObjectKey != "" {
				exported = s
				return true
			}
		}
		return false
	})
	var stored int64
	filepath.Walk(filepath.Join(g.Dir, "pandastack", "cluster", exported.ObjectKey), func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			stored += fi.Size()
		}
		return nil
	})
	t.Logf("exported to %s at %v (%v after the snapshot): %d MiB stored for a %d MiB snapshot",
		exported.ObjectKey, exported.ExportedAt, exported.ExportedAt.Sub(sn.CreatedAt), stored>>20, sn.SizeBytes>>20)

	check := func(t *testing.T, c *sdk.Client, snapshotID string) {
		t.Helper()
		t0 := time.Now()
		sb, err := c.CreateSandbox(ctx, sdk.CreateSandboxParams{Snapshot: snapshotID, TTLSeconds: 300})
		if err != nil {
			t.Fatalf("create from the snapshot: %v", err)
		}
		t.Logf("create took %v", time.Since(t0))
		defer sb.Kill(context.Background())
		if b, err := sb.Files().Read(ctx, "/root/kept.txt"); err != nil || string(b) != "written before the wipe" {
			t.Fatalf("file after the restore: %q, %v", b, err)
		}
		if got := memValue(t, sb, pid); got != v {
			t.Fatalf("process memory after the restore: %q, want %s", got, v)
		}
	}

	t.Run("local files wiped: a create fetches them back", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(dirA, "cow", "snapshots", sn.ID)); err != nil {
			t.Fatal(err)
		}
		check(t, c, sn.ID)
		if !strings.Contains(readLog(a), "fetching them from object storage") {
			t.Fatal("the server log does not say it fetched the snapshot")
		}
	})
	a.stop()
	if strings.Contains(readLog(a), g.SecretKey) {
		t.Fatal("the server log shows the object store's secret")
	}

	t.Run("a new server on a new data dir imports it", func(t *testing.T) {
		b, _ := newTestServer(t, "ps-e2e-obj-b-", "--object-store", url, "--kill-on-exit")
		t.Cleanup(b.stop)
		cmd := exec.Command(filepath.Join(binDir, "pandastack"), "snapshot", "import", exported.ObjectKey)
		cmd.Env = append(os.Environ(), "PANDASTACK_BASE_URL="+b.url, "PANDASTACK_API_KEY="+b.admin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("pandastack snapshot import: %v: %s", err, errb.String())
		}
		t.Logf("import took %v", time.Since(t0))
		id := strings.TrimSpace(out.String())
		if id != sn.ID {
			t.Fatalf("import printed %q, want the exported id %s", id, sn.ID)
		}
		check(t, b.client(b.admin), id)
		// A key with no export answers 404.
		if _, err := b.client(b.admin).ImportSnapshot(ctx, "snapshots/snap_none", ""); !sdk.IsNotFound(err) {
			t.Fatalf("import of a missing export: %v", err)
		}
	})
}

func readLog(s *serverProc) string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}
