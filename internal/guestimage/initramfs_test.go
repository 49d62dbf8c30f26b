package guestimage

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// time1 is an arbitrary file time.
var time1 = time.Unix(1_500_000_000, 0)

// readInitramfs decompresses and parses an initramfs written by
// WriteInitramfs, keyed by entry name.
func readInitramfs(t *testing.T, path string) ([]cpioEntry, map[string]cpioEntry) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	ents := readNewc(t, raw)
	byName := map[string]cpioEntry{}
	for _, e := range ents {
		if _, dup := byName[e.name]; dup {
			t.Errorf("duplicate entry %s", e.name)
		}
		byName[e.name] = e
	}
	return ents, byName
}

func writeTestFile(t *testing.T, path, data string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), perm); err != nil {
		t.Fatal(err)
	}
}

func TestWriteInitramfs(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	writeTestFile(t, agent, "#!agent binary\x00\x01\x02", 0o700)
	mods := []string{
		filepath.Join(dir, "kernel/drivers/virtio/virtio_ring.ko"),
		filepath.Join(dir, "kernel/drivers/virtio/virtio.ko"),
		filepath.Join(dir, "kernel/drivers/block/virtio_blk.ko"),
		filepath.Join(dir, "kernel/drivers/char/hw_random/virtio-rng.ko"),
	}
	for i, m := range mods {
		writeTestFile(t, m, strings.Repeat(filepath.Base(m), i+1), 0o600)
	}
	out := filepath.Join(dir, "initramfs.gz")
	if err := WriteInitramfs(out, agent, mods); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temp file left behind: %v", err)
	}
	ents, byName := readInitramfs(t, out)

	for _, d := range []string{"dev", "proc", "sys", "newroot", "modules"} {
		if e, ok := byName[d]; !ok || e.mode != 0o040755 {
			t.Errorf("directory %s: present %v, mode %o", d, ok, e.mode)
		}
	}
	if e, ok := byName["dev/console"]; !ok || e.mode != 0o020600 || e.rdevMajor != 5 || e.rdevMinor != 1 {
		t.Errorf("dev/console: present %v, mode %o, rdev %d:%d", ok, e.mode, e.rdevMajor, e.rdevMinor)
	}
	if e := byName["init"]; e.mode != 0o100755 || string(e.data) != "#!agent binary\x00\x01\x02" {
		t.Errorf("init: mode %o data %q", e.mode, e.data)
	}
	var wantOrder strings.Builder
	for i, m := range mods {
		base := filepath.Base(m)
		wantOrder.WriteString(base + "\n")
		e, ok := byName["modules/"+base]
		if !ok {
			t.Errorf("modules/%s missing", base)
			continue
		}
		if e.mode != 0o100644 || string(e.data) != strings.Repeat(base, i+1) {
			t.Errorf("modules/%s: mode %o data %q", base, e.mode, e.data)
		}
	}
	if e := byName["modules/order"]; e.mode != 0o100644 || string(e.data) != wantOrder.String() {
		t.Errorf("modules/order: mode %o data %q, want %q", e.mode, e.data, wantOrder.String())
	}
	if want := 5 + 1 + 1 + len(mods) + 1; len(ents) != want {
		t.Errorf("%d entries, want %d", len(ents), want)
	}
	// A parent directory must come before what it holds, or the kernel
	// cannot create the file.
	seen := map[string]bool{}
	for _, e := range ents {
		if d := filepath.Dir(e.name); d != "." && !seen[d] {
			t.Errorf("%s comes before its directory %s", e.name, d)
		}
		seen[e.name] = true
	}

	// Same inputs, same bytes, even with different file times.
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(agent, time1, time1); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "initramfs2.gz")
	if err := WriteInitramfs(out2, agent, mods); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(out2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two runs with the same inputs gave different archives")
	}
}

func TestWriteInitramfsErrors(t *testing.T) {
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent")
	writeTestFile(t, agent, "agent", 0o755)
	a := filepath.Join(dir, "a/virtio.ko")
	b := filepath.Join(dir, "b/virtio.ko")
	writeTestFile(t, a, "a", 0o644)
	writeTestFile(t, b, "b", 0o644)
	out := filepath.Join(dir, "initramfs.gz")
	if err := WriteInitramfs(out, agent, []string{a, b}); err == nil {
		t.Error("two modules with one file name accepted")
	}
	if err := WriteInitramfs(out, filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("missing agent accepted")
	}
	for _, p := range []string{out, out + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after failures: %v", p, err)
		}
	}
}
