package server

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A guest agent linked against libc would panic the guest's kernel at
// boot; the server refuses it at start, naming the fix.
func TestCheckAgentRefusesADynamicBinary(t *testing.T) {
	for _, cgo := range []string{"0", "1"} {
		err := checkAgent(buildProgram(t, "agent-cgo"+cgo, cgo))
		switch {
		case cgo == "0" && err != nil:
			t.Errorf("a static agent is refused: %v", err)
		case cgo == "1" && (err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0")):
			t.Errorf("a dynamically linked agent: %v", err)
		}
	}
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkAgent(script); err == nil {
		t.Error("a script is accepted")
	}
}

// buildProgram builds a small Go program that uses package net (so cgo,
// when enabled, links it against libc) as name, with CGO_ENABLED=cgo.
func buildProgram(t *testing.T, name, cgo string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\nimport \"net\"\nfunc main() { _, _ = net.LookupHost(\"x\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build with CGO_ENABLED=%s: %v\n%s", cgo, err, out)
	}
	return bin
}
