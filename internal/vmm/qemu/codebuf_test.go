package qemu_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/vmm"
	"github.com/pandastack/pandastack/internal/vmm/qemu"
)

// qemuPIDList lists the QEMU processes of VMs under dir.
func qemuPIDList(dir string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "qemu-system") && strings.Contains(string(b), dir+"/") {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// Under TCG a pooled process waits with the start of its code buffer
// faulted in (huge pages, kept from same-page merging by their stamps),
// and the VM restored into it runs: the buffer's stamps do not disturb
// the code QEMU then writes there. Under KVM there is no such buffer.
func TestPooledProcessHasItsCodeBufferFaultedIn(t *testing.T) {
	s := template(t)
	dir := vmDir(t)
	d := newDriver(t, dir)
	d.Prewarm(s, 1)
	deadline := time.Now().Add(60 * time.Second)
	for d.PoolReady(s.Key) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("no process ready in the pool")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pids := qemuPIDList(dir)
	if len(pids) != 1 {
		t.Fatalf("%d qemu processes, want the pooled one", len(pids))
	}
	_, size, rss, err := qemu.CodeBuffer(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	if d.Accel() != pandastack.AccelTCG {
		if size != 0 {
			t.Fatalf("a code buffer of %d MiB under %s", size>>20, d.Accel())
		}
		return
	}
	// Settle: same-page merging scans every 20 ms; merged pages would
	// leave the process's resident set.
	time.Sleep(2 * time.Second)
	if _, _, rss, err = qemu.CodeBuffer(pids[0]); err != nil {
		t.Fatal(err)
	}
	if want := int64(qemu.CodePrefault - qemu.HugePage); rss < want {
		t.Fatalf("the pooled process's code buffer has %d KiB resident, want at least %d", rss>>10, want>>10)
	}
	v, err := d.Restore(context.Background(), s, vmm.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Kill(context.Background())
	cl := agent(t, v)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out strings.Builder
	res, err := cl.Exec(ctx, pandastack.ExecRequest{Cmd: `n=0; for i in $(seq 1 3000); do n=$((n + i)); done; echo $n; ls / | wc -l`}, nil,
		func(ev pandastack.ExecEvent) error {
			if ev.Type == "stdout" {
				out.Write(ev.Data)
			}
			return nil
		})
	if err != nil || res.ExitCode != 0 || !strings.HasPrefix(out.String(), "4501500\n") {
		t.Fatalf("exec in the VM restored into the prefaulted process: exit %d, %q, %v", res.ExitCode, out.String(), err)
	}
}
