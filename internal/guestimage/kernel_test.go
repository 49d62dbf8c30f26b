package guestimage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFetchKernel downloads the real Debian cloud kernel (about 27 MB) into a
// fresh cache, resolves the guest's modules from it and packs them into an
// initramfs.
func TestFetchKernel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cache := t.TempDir()
	var progress bytes.Buffer
	k, err := FetchKernel(ctx, cache, &progress)
	if err != nil {
		t.Fatalf("FetchKernel: %v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("kernel %+v", k)
	if !strings.HasPrefix(k.Package, "linux-image-"+k.Version+"_") || !strings.HasSuffix(k.Package, ".deb") {
		t.Errorf("package %q does not match version %q", k.Package, k.Version)
	}
	for _, p := range []string{k.Vmlinuz, k.ModulesDir} {
		if !filepath.IsAbs(p) || !strings.HasPrefix(p, cache) {
			t.Errorf("%s is not an absolute path in the cache", p)
		}
	}
	if filepath.Base(k.ModulesDir) != k.Version || filepath.Base(filepath.Dir(k.ModulesDir)) != "modules" {
		t.Errorf("ModulesDir %s is not .../modules/%s", k.ModulesDir, k.Version)
	}
	if fi, err := os.Stat(k.Vmlinuz); err != nil || fi.Size() < 1<<20 {
		t.Errorf("vmlinuz: %v", err)
	}
	ents, err := os.ReadDir(filepath.Join(cache, "kernel"))
	if err != nil {
		t.Fatal(err)
	}
	// The entry itself, and the note of which package was resolved (so a
	// rebuild within a day asks apt nothing); no temporaries.
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(ents) != 2 || names[0] != strings.TrimSuffix(k.Package, ".deb") || names[1] != "resolved" {
		t.Errorf("kernel cache holds %v, want the entry for %s and resolved", names, k.Package)
	}

	t.Run("cached", func(t *testing.T) {
		var progress bytes.Buffer
		start := time.Now()
		k2, err := FetchKernel(ctx, cache, &progress)
		if err != nil {
			t.Fatal(err)
		}
		if k2 != k {
			t.Errorf("second call gave %+v, want %+v", k2, k)
		}
		if strings.Contains(progress.String(), "apt-get download:") {
			t.Errorf("second call downloaded again:\n%s", progress.String())
		}
		t.Logf("cached FetchKernel took %v", time.Since(start))
	})

	t.Run("ResolveModules", func(t *testing.T) {
		want := []string{"virtio_mmio", "virtio_blk", "virtio_console", "virtio_net", "virtio-rng"}
		paths, err := k.ResolveModules(want)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range paths {
			if !filepath.IsAbs(p) || !strings.HasPrefix(p, k.ModulesDir+"/") {
				t.Errorf("%s is not an absolute path under ModulesDir", p)
			}
			if _, err := os.Stat(p); err != nil {
				t.Error(err)
			}
			names = append(names, moduleNameFromPath(p))
		}
		t.Logf("load order: %v", names)
		pos := func(name string) int {
			i := slices.Index(names, name)
			if i < 0 {
				t.Fatalf("%s not in %v", name, names)
			}
			return i
		}
		for i, n := range names {
			if slices.Index(names, n) != i {
				t.Errorf("%s listed more than once", n)
			}
		}
		// Every module comes after what modules.dep says it needs (which
		// of virtio and virtio_ring needs the other changes between
		// kernel builds), and virtio_blk needs both.
		dep, err := os.ReadFile(filepath.Join(k.ModulesDir, "modules.dep"))
		if err != nil {
			t.Fatal(err)
		}
		_, deps, err := parseModulesDep(dep)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range paths {
			for _, d := range deps[strings.TrimPrefix(p, k.ModulesDir+"/")] {
				if j := pos(moduleNameFromPath(d)); j > i {
					t.Errorf("%s loads before %s, which it needs: %v", names[i], names[j], names)
				}
			}
		}
		if pos("virtio_ring") > pos("virtio_blk") || pos("virtio") > pos("virtio_blk") {
			t.Errorf("virtio_blk's dependencies do not come before it: %v", names)
		}
		if pos("net_failover") > pos("virtio_net") || pos("failover") > pos("net_failover") {
			t.Errorf("virtio_net's dependencies out of order: %v", names)
		}
		// ext4's quota format (quota_v2, on quota_tree) resolves.
		if q, err := k.ResolveModules([]string{"quota_v2"}); err != nil || len(q) != 2 || moduleNameFromPath(q[0]) != "quota_tree" {
			t.Errorf("quota_v2 resolved to %v, %v; want quota_tree then quota_v2", q, err)
		}

		// Asking again for something already loaded adds nothing.
		again, err := k.ResolveModules([]string{"virtio_blk", "virtio_ring", "virtio-blk"})
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != 3 {
			t.Errorf("virtio_blk twice plus virtio_ring resolved to %v, want 3 modules", again)
		}

		_, err = k.ResolveModules([]string{"virtio_blk", "no_such_module"})
		if err == nil || !strings.Contains(err.Error(), "no_such_module") {
			t.Errorf("unknown module: error %v does not name it", err)
		}

		// The real modules make a real initramfs.
		agent := filepath.Join(t.TempDir(), "agent")
		writeTestFile(t, agent, "agent", 0o755)
		out := filepath.Join(t.TempDir(), "initramfs.gz")
		if err := WriteInitramfs(out, agent, paths); err != nil {
			t.Fatal(err)
		}
		_, byName := readInitramfs(t, out)
		var order []string
		for _, p := range paths {
			order = append(order, filepath.Base(p))
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if e := byName["modules/"+filepath.Base(p)]; !bytes.Equal(e.data, data) {
				t.Errorf("modules/%s differs from %s", filepath.Base(p), p)
			}
		}
		if got := string(byName["modules/order"].data); got != strings.Join(order, "\n")+"\n" {
			t.Errorf("modules/order = %q", got)
		}
	})
}

// TestResolveModulesDep checks dependency ordering, name matching and errors
// against a hand-written modules.dep.
func TestResolveModulesDep(t *testing.T) {
	dir := t.TempDir()
	// Dependencies are listed depmod-style: the full closure, in reverse
	// load order.
	dep := `kernel/a.ko:
kernel/b-dash.ko: kernel/a.ko
kernel/c.ko: kernel/b-dash.ko kernel/a.ko
kernel/d.ko: kernel/c.ko kernel/b-dash.ko kernel/a.ko
kernel/cyc1.ko: kernel/cyc2.ko
kernel/cyc2.ko: kernel/cyc1.ko
`
	writeTestFile(t, filepath.Join(dir, "modules.dep"), dep, 0o644)
	k := Kernel{ModulesDir: dir}
	got, err := k.ResolveModules([]string{"d", "b_dash", "a"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/a.ko", "kernel/b-dash.ko", "kernel/c.ko", "kernel/d.ko"}
	for i := range want {
		want[i] = filepath.Join(dir, want[i])
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := k.ResolveModules([]string{"cyc1"}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("cycle: error %v", err)
	}
	if _, err := k.ResolveModules([]string{"zzz"}); err == nil || !strings.Contains(err.Error(), `"zzz"`) {
		t.Errorf("unknown: error %v", err)
	}
}
