package objstoretest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// VersityGW is a real S3-compatible server (versitygw, posix backend in a
// temporary directory) on a loopback port, for tests.
type VersityGW struct {
	Endpoint  string // http://127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Region    string
	// Dir is the backend's directory: each bucket is a directory in it.
	Dir string
}

// VersityGWVersion is the version scripts/setup builds.
const VersityGWVersion = "v1.8.0"

// FindVersityGW locates the versitygw binary: $PANDASTACK_VERSITYGW, the
// repository's bin/ (where scripts/setup installs it), then PATH.
func FindVersityGW() (string, error) {
	if p := os.Getenv("PANDASTACK_VERSITYGW"); p != "" {
		return p, nil
	}
	if dir, err := os.Getwd(); err == nil {
		for ; dir != "/" && dir != "."; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				p := filepath.Join(dir, "bin", "versitygw")
				if _, err := os.Stat(p); err == nil {
					return p, nil
				}
				break
			}
		}
	}
	p, err := exec.LookPath("versitygw")
	if err != nil {
		return "", fmt.Errorf("versitygw not found in bin/ or on PATH: run scripts/setup (it builds versitygw %s from the Go module proxy)", VersityGWVersion)
	}
	return p, nil
}

// StartVersityGW starts versitygw with one empty bucket per name given and
// stops it (removing its files) when the test ends. Without the binary the
// test is skipped with the reason — or fails, when CI=true: CI must run
// every backend.
func StartVersityGW(t testing.TB, buckets ...string) *VersityGW {
	t.Helper()
	bin, err := FindVersityGW()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	g := &VersityGW{AccessKey: "pandastack-test", SecretKey: "pandastack-test-secret", Region: "us-east-1", Dir: t.TempDir()}
	for _, b := range buckets {
		if err := os.Mkdir(filepath.Join(g.Dir, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	g.Endpoint = "http://" + addr
	cmd := exec.Command(bin, "--port", addr, "--quiet", "--region", g.Region, "posix", g.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+g.AccessKey, "ROOT_SECRET_ACCESS_KEY="+g.SecretKey)
	out, err := os.CreateTemp(t.TempDir(), "versitygw-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		out.Close()
	})
	// Ready when it accepts connections (or failed when it exits).
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return g
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(out.Name())
			exited <- err
			t.Fatalf("versitygw exited (%v): %s", err, b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("versitygw did not listen on %s: %s", addr, b)
		}
	}
}
