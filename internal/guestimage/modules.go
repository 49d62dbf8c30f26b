package guestimage

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ResolveModules returns the absolute .ko paths needed to load want (module
// names such as "virtio_blk") together with all their dependencies, in load
// order (dependencies first, no duplicates), read from ModulesDir/modules.dep.
// '-' and '_' in names are treated alike. An unknown name is an error naming
// it.
func (k Kernel) ResolveModules(want []string) ([]string, error) {
	depFile := filepath.Join(k.ModulesDir, "modules.dep")
	data, err := os.ReadFile(depFile)
	if err != nil {
		return nil, fmt.Errorf("read modules.dep: %w", err)
	}
	byName, deps, err := parseModulesDep(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", depFile, err)
	}

	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var order []string
	var visit func(path string, chain []string) error
	visit = func(path string, chain []string) error {
		switch state[path] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("dependency cycle: %s -> %s", strings.Join(chain, " -> "), path)
		}
		state[path] = visiting
		// modules.dep lists dependencies in reverse load order (modprobe
		// loads them from the end); walk them that way round too.
		d := deps[path]
		for i := len(d) - 1; i >= 0; i-- {
			if err := visit(d[i], append(chain, path)); err != nil {
				return err
			}
		}
		state[path] = done
		order = append(order, path)
		return nil
	}
	for _, name := range want {
		path, ok := byName[normalizeModuleName(name)]
		if !ok {
			return nil, fmt.Errorf("resolve modules: module %q not found in %s", name, depFile)
		}
		if err := visit(path, nil); err != nil {
			return nil, fmt.Errorf("resolve module %q: %w", name, err)
		}
	}
	abs := make([]string, len(order))
	for i, p := range order {
		abs[i] = filepath.Join(k.ModulesDir, p)
	}
	return abs, nil
}

// parseModulesDep reads modules.dep lines ("path: dep dep ...") into a map
// from normalized module name to path and a map from path to its
// dependencies' paths.
func parseModulesDep(data []byte) (byName map[string]string, deps map[string][]string, err error) {
	byName = map[string]string{}
	deps = map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		path, rest, ok := strings.Cut(line, ":")
		if !ok {
			return nil, nil, fmt.Errorf("line %d: no ':' in %q", n, line)
		}
		path = strings.TrimSpace(path)
		name := moduleNameFromPath(path)
		if _, dup := byName[name]; !dup {
			byName[name] = path
		}
		deps[path] = strings.Fields(rest)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return byName, deps, nil
}

// normalizeModuleName makes '-' and '_' in a module name alike.
func normalizeModuleName(name string) string {
	return strings.ReplaceAll(strings.TrimSpace(name), "-", "_")
}

// moduleNameFromPath turns "kernel/drivers/char/hw_random/virtio-rng.ko"
// (possibly compressed, .ko.xz) into "virtio_rng".
func moduleNameFromPath(path string) string {
	base := filepath.Base(path)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return normalizeModuleName(base)
}

// writeModulesDep writes modsDir/modules.dep as depmod would, from the
// name= and depends= fields in each module's .modinfo section: one line per
// module, "path: deps" with paths relative to modsDir and the full
// dependency closure listed in reverse load order. Only uncompressed .ko
// modules are supported (Debian's bookworm kernels ship those).
func writeModulesDep(modsDir string) error {
	type module struct {
		path    string
		depends []string
	}
	var mods []*module
	byName := map[string]*module{}
	err := filepath.WalkDir(modsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.Contains(d.Name(), ".ko") {
			return nil
		}
		rel, err := filepath.Rel(modsDir, p)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(d.Name(), ".ko") {
			return fmt.Errorf("module %s: compressed modules are not supported", rel)
		}
		name, depends, err := readModinfo(p)
		if err != nil {
			return fmt.Errorf("module %s: %w", rel, err)
		}
		if name == "" {
			name = moduleNameFromPath(rel)
		}
		m := &module{path: rel, depends: depends}
		mods = append(mods, m)
		if _, dup := byName[normalizeModuleName(name)]; !dup {
			byName[normalizeModuleName(name)] = m
		}
		return nil
	})
	if err != nil {
		return err
	}

	var buf bytes.Buffer
	for _, m := range mods { // WalkDir order: sorted, deterministic
		var order []string
		seen := map[*module]bool{m: true}
		var visit func(x *module) error
		visit = func(x *module) error {
			for _, dn := range x.depends {
				d, ok := byName[normalizeModuleName(dn)]
				if !ok {
					return fmt.Errorf("module %s depends on unknown module %q", x.path, dn)
				}
				if seen[d] {
					continue
				}
				seen[d] = true
				if err := visit(d); err != nil {
					return err
				}
				order = append(order, d.path)
			}
			return nil
		}
		if err := visit(m); err != nil {
			return err
		}
		slices.Reverse(order)
		buf.WriteString(m.path + ":")
		for _, p := range order {
			buf.WriteString(" " + p)
		}
		buf.WriteByte('\n')
	}
	return os.WriteFile(filepath.Join(modsDir, "modules.dep"), buf.Bytes(), 0o644)
}

// readModinfo returns the name= and depends= fields of a kernel module's
// .modinfo section.
func readModinfo(path string) (name string, depends []string, err error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return "", nil, fmt.Errorf("no .modinfo section")
	}
	data, err := sec.Data()
	if err != nil {
		return "", nil, fmt.Errorf("read .modinfo: %w", err)
	}
	for _, field := range bytes.Split(data, []byte{0}) {
		k, v, ok := strings.Cut(string(field), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			name = v
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					depends = append(depends, d)
				}
			}
		}
	}
	return name, depends, nil
}
