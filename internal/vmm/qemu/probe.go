package qemu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// ProbeMarker is what the guest prints on its console when booted with
// pandastack.probe=1, just before powering off.
const ProbeMarker = "PANDASTACK-PROBE-OK"

// ProbeResult says which accelerator a host can run guests with, and why.
type ProbeResult struct {
	Accel  pandastack.Accel `json:"accel"`
	Reason string           `json:"reason"`
	BootMs int64            `json:"boot_ms,omitempty"`
}

// Probe boots kernel+initrd under KVM and reports KVM only if the guest
// really ran to userspace: an openable /dev/kvm is not enough (a nested,
// paravirtual KVM can fail in instruction emulation). Otherwise TCG.
func Probe(ctx context.Context, binary, kernel, initrd string) ProbeResult {
	if binary == "" {
		binary = "qemu-system-x86_64"
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return ProbeResult{Accel: pandastack.AccelTCG, Reason: fmt.Sprintf("/dev/kvm unusable: %v", err)}
	}
	f.Close()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "-M", "microvm,acpi=on", "-accel", "kvm", "-cpu", "host", "-m", "256M", "-smp", "1",
		"-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-serial", "stdio",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 quiet panic=-1 pandastack.probe=1")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return ProbeResult{Accel: pandastack.AccelTCG, Reason: fmt.Sprintf("start qemu for the KVM probe: %v", err)}
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			if strings.Contains(out.String(), ProbeMarker) {
				return ProbeResult{Accel: pandastack.AccelKVM, Reason: "a guest booted under KVM", BootMs: time.Since(t0).Milliseconds()}
			}
			return ProbeResult{Accel: pandastack.AccelTCG, Reason: "a guest did not boot under KVM: " + lastLine(out.String())}
		case <-tick.C:
			if strings.Contains(out.String(), ProbeMarker) {
				cmd.Process.Kill()
				<-done
				return ProbeResult{Accel: pandastack.AccelKVM, Reason: "a guest booted under KVM", BootMs: time.Since(t0).Milliseconds()}
			}
		case <-ctx.Done():
			cmd.Process.Kill()
			<-done
			return ProbeResult{Accel: pandastack.AccelTCG, Reason: "a guest did not boot under KVM within 20s: " + lastLine(out.String())}
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	if s == "" {
		return "no console output"
	}
	return s
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
