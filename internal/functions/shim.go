package functions

import (
	"archive/tar"
	"bytes"
	"embed"
	"fmt"
)

// The runtime shims, unpacked beside the code in every function's VM.
//
//go:embed shim/shim.py shim/shim.mjs
var shimFS embed.FS

// Where things are in a function's VM.
const (
	codeDir  = "/var/task"          // the bundle
	shimDir  = "/opt/pandastack-fn" // the shims
	stateDir = "/run/pandastack-fn" // "ready" or "error" once the handler loaded
	shimPort = 9009                 // the shim's port on the guest's loopback
)

func addShims(tw *tar.Writer) error {
	for _, name := range []string{"shim.py", "shim.mjs"} {
		body, err := shimFS.ReadFile("shim/" + name)
		if err != nil {
			return fmt.Errorf("read shim %s: %w", name, err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: shimDir[1:] + "/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(body); err != nil {
			return err
		}
	}
	return nil
}

// shimCommand is the shell command that starts runtime's shim for handler
// file.function (after a check that the file exists it is the shim that
// reports what is wrong).
func shimCommand(runtime, file, function string) string {
	args := fmt.Sprintf("%s %s %s %d %s", codeDir, shellQuote(file), shellQuote(function), shimPort, stateDir)
	var run string
	switch runtime {
	case RuntimePython:
		run = "python3 -u " + shimDir + "/shim.py " + args
	default:
		run = "node --experimental-detect-module " + shimDir + "/shim.mjs " + args
	}
	return fmt.Sprintf("rm -rf %[1]s && mkdir -p %[1]s && cd %[2]s && exec setsid %[3]s </dev/null >%[1]s/shim.log 2>&1", stateDir, codeDir, run)
}

// shimWaitCommand is the shell command that starts runtime's shim
// waiting for a handler (the runtime base, base.go).
func shimWaitCommand(runtime string) string {
	args := fmt.Sprintf("--wait %d %s", shimPort, stateDir)
	run := "python3 -u " + shimDir + "/shim.py " + args
	if runtime == RuntimeNode {
		run = "node --experimental-detect-module " + shimDir + "/shim.mjs " + args
	}
	return fmt.Sprintf("rm -rf %[1]s && mkdir -p %[1]s && cd / && exec setsid %[2]s </dev/null >%[1]s/shim.log 2>&1", stateDir, run)
}

// shimsTar is a tar of the shims alone, entries under shimDir.
func shimsTar() (*bytes.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := addShims(tw); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("pack shims: %w", err)
	}
	return bytes.NewReader(buf.Bytes()), nil
}

func shellQuote(s string) string {
	out := "'"
	for _, r := range s {
		if r == '\'' {
			out += `'\''`
		} else {
			out += string(r)
		}
	}
	return out + "'"
}
