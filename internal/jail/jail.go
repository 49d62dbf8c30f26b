// Package jail confines a VMM process the way Firecracker's jailer does:
// the process starts in fresh mount, network, pid, ipc and uts namespaces,
// pivots into a root of its own that holds only the files it is given
// (bind mounts, read-only unless said otherwise, plus the host's /usr
// read-only for the binary and its libraries), joins a cgroup that caps its
// CPU, memory, tasks and I/O, drops every capability, sets no_new_privs and
// only then executes the VMM as its unprivileged user.
//
// The confinement runs in a short-lived child: the binary that imports this
// package re-executes itself under the name ChildName (see Command); the
// package's init recognises that name, sets the jail up and executes the
// VMM in place of itself, so the process the caller started is the VMM.
//
// OpenBeneath is the other half: the server opens files in a directory a
// VM could write without following any link out of it.
package jail

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// ChildName is argv[0] of the re-executed jail child.
const ChildName = "pandastack-jail"

// specEnv carries the Spec to the child.
const specEnv = "PANDASTACK_JAIL_SPEC"

// RootDir is the mount point of every jail's root (a tmpfs in the jail's
// own mount namespace: the host sees an empty directory).
const RootDir = "/run/pandastack/jail"

// Bind is one host path made visible in the jail at the same path.
type Bind struct {
	Path     string `json:"path"`
	Writable bool   `json:"writable,omitempty"`
}

// Spec is what a jail holds and who runs in it.
type Spec struct {
	Binds  []Bind   `json:"binds"`
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Nice   int      `json:"nice,omitempty"`
	// Cgroups are the directories (one per hierarchy) the process joins
	// before it executes the VMM; see Cgroups.Create.
	Cgroups []string `json:"cgroups,omitempty"`
	// Devices are device nodes bound in (e.g. /dev/kvm); /dev/null,
	// /dev/zero, /dev/random and /dev/urandom always are.
	Devices []string `json:"devices,omitempty"`
	// MergeMemory lets the kernel's same-page merging (KSM) scan the
	// VMM's private memory (PR_SET_MEMORY_MERGE, kept across its exec),
	// so pages identical in several VMMs are kept once. Best effort: a
	// kernel without it (before 6.4) leaves the VMM as it was.
	MergeMemory bool `json:"merge_memory,omitempty"`
}

// Namespaces are the namespaces a jailed process gets of its own.
const Namespaces = syscall.CLONE_NEWNS | syscall.CLONE_NEWNET | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS

// Command returns a command that runs binary with args inside a jail made
// from spec. The caller sets ExtraFiles, Stdout and Stderr and starts it;
// its Process is the VMM's once the child has set up the jail. The VMM gets
// an empty environment.
func Command(spec Spec, binary string, args ...string) (*exec.Cmd, error) {
	if spec.UID <= 0 {
		return nil, fmt.Errorf("jail: a jailed process needs an unprivileged uid, not %d", spec.UID)
	}
	for _, b := range spec.Binds {
		if !filepath.IsAbs(b.Path) {
			return nil, fmt.Errorf("jail: bind %q is not an absolute path", b.Path)
		}
	}
	if err := os.MkdirAll(RootDir, 0o755); err != nil {
		return nil, fmt.Errorf("jail: create %s: %w", RootDir, err)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("jail: encode spec: %w", err)
	}
	// /proc/self/exe, not a path: the server's binary may have been
	// replaced on disk since it started.
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: append([]string{ChildName, binary}, args...),
		Env:  []string{specEnv + "=" + string(b)},
		Dir:  "/",
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true,
			Cloneflags: Namespaces,
		},
	}
	return cmd, nil
}

// Available reports whether jails can be made here: it needs root (for the
// namespaces and mounts) and Linux's pivot_root.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("jail: needs root (running as uid %d)", os.Geteuid())
	}
	return nil
}
