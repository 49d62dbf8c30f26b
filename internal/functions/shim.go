package functions

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
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
	// nodeHelloFile is the Node shim's hello addon in shimDir (shim/hello.c).
	nodeHelloFile = "hello.node"
)

// shimSet is what goes under shimDir in every function's VM: the two
// runtimes' shims and, when the server has it (Config.NodeHelloAddon),
// the Node shim's hello addon. hash names the set: a new set needs new
// runtime bases.
type shimSet struct {
	files     []shimFile
	nodeHello bool // the Node shim can do the hello's part
	hash      string
}

type shimFile struct {
	name string
	body []byte
}

func newShimSet(nodeHello []byte) shimSet {
	var set shimSet
	for _, name := range []string{"shim.py", "shim.mjs"} {
		body, err := shimFS.ReadFile("shim/" + name)
		if err != nil {
			panic("embedded shim " + name + ": " + err.Error())
		}
		set.files = append(set.files, shimFile{name, body})
	}
	if set.nodeHello = len(nodeHello) > 0; set.nodeHello {
		set.files = append(set.files, shimFile{nodeHelloFile, nodeHello})
	}
	h := sha256.New()
	for _, f := range set.files {
		h.Write(f.body)
	}
	set.hash = hex.EncodeToString(h.Sum(nil))
	return set
}

// add writes the set into tw, entries under shimDir.
func (set shimSet) add(tw *tar.Writer) error {
	for _, f := range set.files {
		name, body := f.name, f.body
		if err := tw.WriteHeader(&tar.Header{Name: shimDir[1:] + "/" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("pack shim %s: %w", name, err)
		}
		if _, err := tw.Write(body); err != nil {
			return fmt.Errorf("pack shim %s: %w", name, err)
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

// tar is a tar of the set alone, entries under shimDir.
func (set shimSet) tar() (*bytes.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := set.add(tw); err != nil {
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
