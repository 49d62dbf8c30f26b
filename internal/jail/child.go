package jail

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	if len(os.Args) < 2 || os.Args[0] != ChildName || os.Getenv(specEnv) == "" {
		return
	}
	// Setting up happens on one thread, which then executes the VMM: its
	// niceness (per thread on Linux) is the one the VMM inherits.
	runtime.LockOSThread()
	err := runChild(os.Getenv(specEnv), os.Args[1], os.Args[1:])
	fmt.Fprintf(os.Stderr, "pandastack jail: %v\n", err)
	os.Exit(127)
}

// runChild sets the jail up and executes the VMM; it returns only on error.
func runChild(encoded, binary string, argv []string) error {
	var spec Spec
	if err := json.Unmarshal([]byte(encoded), &spec); err != nil {
		return fmt.Errorf("decode spec: %w", err)
	}
	for _, dir := range spec.Cgroups {
		if err := os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", dir, err)
		}
	}
	if err := makeRoot(spec, binary); err != nil {
		return err
	}
	if spec.Nice != 0 {
		if err := unix.Setpriority(unix.PRIO_PROCESS, 0, spec.Nice); err != nil {
			return fmt.Errorf("set niceness: %w", err)
		}
	}
	if spec.MergeMemory {
		// EINVAL: a kernel without per-process merging; the VMM runs
		// unmerged, as it would without this.
		if err := unix.Prctl(unix.PR_SET_MEMORY_MERGE, 1, 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("enable same-page merging: %w", err)
		}
	}
	if err := dropPrivileges(spec); err != nil {
		return err
	}
	if err := syscall.Exec(binary, argv, []string{}); err != nil {
		return fmt.Errorf("exec %s: %w", binary, err)
	}
	return nil
}

// dropPrivileges empties the capability bounding set, switches to the
// jail's user (which clears the permitted and effective sets) and forbids
// gaining privileges back through exec.
func dropPrivileges(spec Spec) error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	groups := make([]int, len(spec.Groups))
	for i, g := range spec.Groups {
		groups[i] = int(g)
	}
	if err := syscall.Setgroups(groups); err != nil {
		return fmt.Errorf("set groups: %w", err)
	}
	if err := syscall.Setresgid(spec.GID, spec.GID, spec.GID); err != nil {
		return fmt.Errorf("set gid: %w", err)
	}
	if err := syscall.Setresuid(spec.UID, spec.UID, spec.UID); err != nil {
		return fmt.Errorf("set uid: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	// Ambient capabilities are cleared by the uid change; make sure.
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	return nil
}
