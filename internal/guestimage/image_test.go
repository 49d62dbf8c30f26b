package guestimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// debugfsRun runs `debugfs -R req img` and returns its standard output.
func debugfsRun(t *testing.T, img, req string) string {
	t.Helper()
	out, err := exec.Command(lookTool("debugfs"), "-R", req, img).Output()
	if err != nil {
		t.Fatalf("debugfs -R %q: %v", req, err)
	}
	return string(out)
}

// statMode returns the type and octal permission bits debugfs reports for
// path in img.
func statMode(t *testing.T, img, path string) (typ, mode, owner string) {
	t.Helper()
	out := debugfsRun(t, img, "stat "+dq(path))
	m := regexp.MustCompile(`Type:\s+(\S+)\s+Mode:\s+([0-7]+)`).FindStringSubmatch(out)
	o := regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil || o == nil {
		t.Fatalf("debugfs stat %s: unexpected output %q", path, out)
	}
	return m[1], m[2], o[1] + ":" + o[2]
}

// treeSnapshot records every path, mode and content under dir.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		snap[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestWriteExt4(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	writeTestFile(t, filepath.Join(root, "etc/hostname"), "sandbox\n", 0o644)
	writeTestFile(t, filepath.Join(root, "usr/bin/tool"), "#!/bin/sh\necho tool\n", 0o755)
	writeTestFile(t, filepath.Join(root, "usr/sbin/pandastack-guest"), "old agent", 0o644)
	writeTestFile(t, filepath.Join(root, "home/user/notes.txt"), "notes", 0o600)
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent")
	agentData := "\x7fELF pretend agent binary " + strings.Repeat("x", 100000)
	writeTestFile(t, agent, agentData, 0o755)
	helper := filepath.Join(dir, "helper")
	writeTestFile(t, helper, "helper data", 0o640)
	before := treeSnapshot(t, root)

	out := filepath.Join(dir, "root.ext4")
	extra := map[string]string{
		"/usr/sbin/pandastack-guest": agent,  // replaces a file in the rootfs
		"/opt/pandastack/lib/helper": helper, // needs new parent directories
	}
	size, err := WriteExt4(ctx, out, root, extra, 0)
	if err != nil {
		t.Fatal(err)
	}
	if size != 1088 { // a few KiB of content: 1.3*1 MiB + 1024, rounded up to 64
		t.Errorf("size %d MiB, want 1088", size)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(size)<<20 {
		t.Errorf("image is %d bytes, want %d MiB", fi.Size(), size)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temp image left behind: %v", err)
	}

	if got := debugfsRun(t, out, "cat /usr/sbin/pandastack-guest"); got != agentData {
		t.Errorf("agent in image: %d bytes, want %d (%.40q)", len(got), len(agentData), got)
	}
	if typ, mode, owner := statMode(t, out, "/usr/sbin/pandastack-guest"); typ != "regular" || mode != "0755" || owner != "0:0" {
		t.Errorf("agent: type %s mode %s owner %s, want regular 0755 0:0", typ, mode, owner)
	}
	if got := debugfsRun(t, out, "cat /opt/pandastack/lib/helper"); got != "helper data" {
		t.Errorf("helper in image: %q", got)
	}
	if typ, mode, owner := statMode(t, out, "/opt/pandastack/lib/helper"); typ != "regular" || mode != "0640" || owner != "0:0" {
		t.Errorf("helper: type %s mode %s owner %s, want regular 0640 0:0", typ, mode, owner)
	}
	for _, d := range []string{"/opt", "/opt/pandastack", "/opt/pandastack/lib"} {
		if typ, mode, owner := statMode(t, out, d); typ != "directory" || mode != "0755" || owner != "0:0" {
			t.Errorf("%s: type %s mode %s owner %s, want directory 0755 0:0", d, typ, mode, owner)
		}
	}
	if got := debugfsRun(t, out, "cat /usr/bin/tool"); got != "#!/bin/sh\necho tool\n" {
		t.Errorf("/usr/bin/tool in image: %q", got)
	}
	if typ, mode, _ := statMode(t, out, "/home/user/notes.txt"); typ != "regular" || mode != "0600" {
		t.Errorf("notes.txt: type %s mode %s", typ, mode)
	}
	if typ, _, _ := statMode(t, out, "/bin"); typ != "symlink" {
		t.Errorf("/bin: type %s, want symlink", typ)
	}
	if label := debugfsRun(t, out, "stats"); !strings.Contains(label, "Filesystem volume name:   pandastack-root") {
		t.Errorf("label not set:\n%.300s", label)
	}
	fsck, err := exec.Command(lookTool("e2fsck"), "-fn", out).CombinedOutput()
	if err != nil {
		t.Errorf("e2fsck -fn: %v\n%s", err, fsck)
	}

	after := treeSnapshot(t, root)
	if len(before) != len(after) {
		t.Errorf("rootfs dir changed: %d entries before, %d after", len(before), len(after))
	}
	for p, v := range before {
		if after[p] != v {
			t.Errorf("rootfs dir changed at %s", p)
		}
	}

	// An explicit size is used as given.
	if size, err := WriteExt4(ctx, out, root, nil, 128); err != nil || size != 128 {
		t.Errorf("WriteExt4 with 128 MiB: size %d, error %v", size, err)
	}
	// A guest path through a symlink in the rootfs is refused.
	if _, err := WriteExt4(ctx, out, root, map[string]string{"/bin/x": helper}, 64); err == nil {
		t.Error("extra file under a symlinked directory accepted")
	}
}

func TestDefaultImageMiB(t *testing.T) {
	for _, c := range []struct {
		used int64
		want int
	}{
		{0, 1024},
		{1, 1088},          // 1 MiB -> ceil(1.3) = 2 -> 1026 -> 1088
		{100 << 20, 1216},  // 130 + 1024 = 1154 -> 1216
		{1000 << 20, 2368}, // 1300 + 1024 = 2324 -> 2368
	} {
		if got := defaultImageMiB(c.used); got != c.want {
			t.Errorf("defaultImageMiB(%d) = %d, want %d", c.used, got, c.want)
		}
	}
}
