package guestimage

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A host-chroot step fetches nothing: it runs in a network namespace of
// its own that has only a loopback interface, while the host has more.
// The chroot is a tiny root holding the host's dash and the C library.
func TestRunStepsHaveNoNetwork(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root (chroot, mounts, a network namespace)")
	}
	root := rootfsCache(t)
	for _, f := range []string{"/bin/sh", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"} {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Skipf("this host has no %s: %v", f, err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var progress bytes.Buffer
	step := `while read -r line; do echo "$line"; done < /proc/net/dev > /interfaces`
	if err := runSteps(context.Background(), root, []string{step}, &progress); err != nil {
		t.Fatalf("runSteps: %v\n%s", err, progress.String())
	}
	checkNoMounts(t, root)
	out, err := os.ReadFile(filepath.Join(root, "interfaces"))
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []string
	for _, l := range strings.Split(string(out), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("the step saw interfaces %v, want only lo:\n%s", ifaces, out)
	}
	host, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(host) < 2 {
		t.Logf("the host itself has only %d interface(s): the check above proves less here", len(host))
	}
}
