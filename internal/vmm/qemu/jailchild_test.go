package qemu_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/jail"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

const fakeJailChildEnv = "PANDASTACK_TEST_FAKE_JAIL_CHILD"

// A server killed while a VM's jail was being set up leaves the jail child
// running, about to exec QEMU under the same pid. The restart's recovery
// must know that process as the VM's, or it removes the VM's directory,
// leaves the process, and QEMU then runs with nothing that owns it (the
// ×100 crash-chaos run found one).
func TestRecoveryFindsAJailChildBeforeItExecsQEMU(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: self, Env: append(os.Environ(), fakeJailChildEnv+"=1"),
		Args: []string{jail.ChildName, "/usr/bin/qemu-system-x86_64", "-name", "vm_jailchild", "-m", "64"}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); !qemu.IsOurQEMU(pid, "vm_jailchild"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			t.Fatalf("a jail child about to exec QEMU -name vm_jailchild is not recognised (cmdline %q)", b)
		}
	}
	if qemu.IsOurQEMU(pid, "vm_other") {
		t.Fatal("the jail child is taken for another VM's")
	}
	if qemu.IsOurQEMU(os.Getpid(), "vm_jailchild") {
		t.Fatal("a process that is neither QEMU nor a jail child is taken for QEMU")
	}
}
