package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cli runs the real pandastack binary against the suite's server.
func cli(t *testing.T, key, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "pandastack"), args...)
	cmd.Env = append(os.Environ(), "PANDASTACK_BASE_URL="+main.url, "PANDASTACK_API_KEY="+key)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLI(t *testing.T) {
	out, _, code := cli(t, main.admin, "", "keys", "create", "--team", "cli-team")
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "pds_") {
		t.Fatalf("keys create: %d %q", code, out)
	}
	out, errOut, code := cli(t, key, "", "sandbox", "create", "--template", template, "--ttl", "300", "--meta", "via=cli")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "sbx_") {
		t.Fatalf("sandbox create: %d %q %s", code, out, errOut)
	}
	defer cli(t, key, "", "sandbox", "kill", id)

	out, errOut, code = cli(t, key, "", "sandbox", "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || out != "out\n" || errOut != "err\n" {
		t.Fatalf("exec: exit %d stdout %q stderr %q", code, out, errOut)
	}
	if _, errOut, code = cli(t, key, "data from stdin", "fs", "write", id, "/root/x.txt", "-"); code != 0 {
		t.Fatalf("fs write: %d %s", code, errOut)
	}
	if out, _, code = cli(t, key, "", "fs", "read", id, "/root/x.txt"); code != 0 || out != "data from stdin" {
		t.Fatalf("fs read: %d %q", code, out)
	}
	if out, _, _ = cli(t, key, "", "sandbox", "ls"); !strings.Contains(out, id) || !strings.Contains(out, "tcg") && !strings.Contains(out, "kvm") {
		t.Fatalf("sandbox ls does not show %s with its accelerator:\n%s", id, out)
	}
	if out, _, _ = cli(t, key, "", "template", "ls"); !strings.Contains(out, template) {
		t.Fatalf("template ls:\n%s", out)
	}
	t.Run("fork, snapshot, hibernate, wake", func(t *testing.T) {
		if _, errOut, code := cli(t, key, "", "sandbox", "exec", id, "--", "sh", "-c", "echo parent > /root/state.txt"); code != 0 {
			t.Fatalf("exec: %d %s", code, errOut)
		}
		out, errOut, code := cli(t, key, "", "sandbox", "fork", id, "--count", "2")
		kids := strings.Fields(out)
		if code != 0 || len(kids) != 2 {
			t.Fatalf("sandbox fork --count 2: %d %q %s", code, out, errOut)
		}
		for _, k := range kids {
			defer cli(t, key, "", "sandbox", "kill", k)
			if out, _, code := cli(t, key, "", "fs", "read", k, "/root/state.txt"); code != 0 || out != "parent\n" {
				t.Fatalf("fork %s reads %q (exit %d)", k, out, code)
			}
		}
		out, errOut, code = cli(t, key, "", "sandbox", "snapshot", id, "--name", "cli-snap")
		snap := strings.TrimSpace(out)
		if code != 0 || !strings.HasPrefix(snap, "snap_") {
			t.Fatalf("sandbox snapshot: %d %q %s", code, out, errOut)
		}
		if out, _, code := cli(t, key, "", "snapshot", "ls"); code != 0 || !strings.Contains(out, snap) || !strings.Contains(out, "cli-snap") {
			t.Fatalf("snapshot ls: %d\n%s", code, out)
		}
		if _, errOut, code := cli(t, key, "", "sandbox", "snapshot", id, "--name", "cli-snap"); code == 0 || !strings.Contains(errOut, "conflict") {
			t.Fatalf("a second snapshot named cli-snap: exit %d %q", code, errOut)
		}
		out, errOut, code = cli(t, key, "", "sandbox", "create", "--snapshot", snap)
		restored := strings.TrimSpace(out)
		if code != 0 || !strings.HasPrefix(restored, "sbx_") {
			t.Fatalf("sandbox create --snapshot: %d %q %s", code, out, errOut)
		}
		defer cli(t, key, "", "sandbox", "kill", restored)
		if out, _, code := cli(t, key, "", "fs", "read", restored, "/root/state.txt"); code != 0 || out != "parent\n" {
			t.Fatalf("the snapshot's sandbox reads %q (exit %d)", out, code)
		}
		if out, errOut, code := cli(t, key, "", "sandbox", "hibernate", id); code != 0 || strings.TrimSpace(out) != "hibernated" {
			t.Fatalf("sandbox hibernate: %d %q %s", code, out, errOut)
		}
		if out, errOut, code := cli(t, key, "", "sandbox", "wake", id); code != 0 || strings.TrimSpace(out) != "running" {
			t.Fatalf("sandbox wake: %d %q %s", code, out, errOut)
		}
		if out, _, code := cli(t, key, "", "fs", "read", id, "/root/state.txt"); code != 0 || out != "parent\n" {
			t.Fatalf("after the wake the sandbox reads %q (exit %d)", out, code)
		}
		if _, errOut, code := cli(t, key, "", "snapshot", "delete", snap); code != 0 {
			t.Fatalf("snapshot delete: %d %s", code, errOut)
		}
		if out, _, _ := cli(t, key, "", "snapshot", "ls"); strings.Contains(out, snap) {
			t.Fatalf("snapshot ls after delete still shows %s:\n%s", snap, out)
		}
	})
	if _, _, code = cli(t, key, "", "sandbox", "kill", id); code != 0 {
		t.Fatalf("kill: %d", code)
	}
	_, errOut, code = cli(t, key, "", "sandbox", "exec", id, "--", "true")
	if code == 0 || !strings.Contains(errOut, "gone") {
		t.Fatalf("exec in a killed sandbox: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code = cli(t, "pds_wrong000000000000000000000000000000000", "", "sandbox", "ls"); code != 1 || !strings.Contains(errOut, "unauthorized") {
		t.Fatalf("wrong key: exit %d %q", code, errOut)
	}
}

// A second build of an unchanged template is answered from the cache.
func TestTemplateRebuildIsCached(t *testing.T) {
	before, _, _ := cli(t, main.admin, "", "template", "ls")
	t0 := time.Now()
	out, errOut, code := cli(t, main.admin, "", "template", "build", template)
	d := time.Since(t0)
	if code != 0 {
		t.Fatalf("template build: %d\n%s%s", code, out, errOut)
	}
	logs := out + errOut
	for _, want := range []string{"[1/5]", "kernel: ", "(cached)", "cached: "} {
		if !strings.Contains(logs, want) {
			t.Errorf("build log lacks %q:\n%s", want, logs)
		}
	}
	after, _, _ := cli(t, main.admin, "", "template", "ls")
	if before != after {
		t.Errorf("template list changed by a cached rebuild:\n%s\n%s", before, after)
	}
	t.Logf("cached rebuild took %v", d)
}

// doctor checks the host and says plainly which accelerator sandboxes run
// under, after booting a guest under KVM to find out.
func TestDoctor(t *testing.T) {
	out, errOut, code := cli(t, "", "", "doctor", "--data-dir", main.dataDir, "--cache-dir", cacheDir)
	if code != 0 {
		t.Fatalf("doctor: exit %d\n%s\n%s", code, out, errOut)
	}
	var accel string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "accelerator: ") {
			accel = strings.Fields(l)[1]
		}
	}
	h, err := main.client(main.admin).Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(accel, h.Accel) {
		t.Fatalf("doctor says accelerator %q, the server runs under %q:\n%s", accel, h.Accel, out)
	}
	want := []string{"isolation:", "free space for vm files", "qemu-system-x86_64"}
	if accel == "TCG" {
		want = append(want, "NOT a security boundary")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("doctor's report lacks %q:\n%s", w, out)
		}
	}
}
