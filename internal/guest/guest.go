// Package guest is the guest agent, pandastack-guest: the one program PandaStack
// puts inside every microVM. It plays three roles, chosen at start:
//
//   - as /init in the initramfs it loads the virtio modules, mounts the root
//     filesystem and switches to it, executing itself from there;
//   - as PID 1 of the root filesystem it mounts the kernel filesystems, reaps
//     orphans and serves the host over the virtio-serial port (see guestproto);
//   - run by hand with "serve PORT" it serves a given device or socket, for tests.
//
// It stays small and static: standard library, x/sys/unix and yamux only.
package guest

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"
)

// Main runs the agent and returns only on a fatal error. As PID 1 it never
// returns: the kernel would panic, so it logs and halts instead.
func Main(args []string) error {
	log.SetFlags(log.Lmicroseconds)
	log.SetPrefix("pandastack-guest: ")
	switch {
	case os.Getpid() == 1 && isInitramfs():
		err := initramfs()
		fatal(err)
		return err
	case os.Getpid() == 1:
		if err := setupSystem(); err != nil {
			log.Printf("system setup: %v", err)
		}
		if err := setupNetwork(); err != nil {
			log.Printf("network setup: %v", err)
		}
		a := newAgent()
		go a.procs.reap()
		err := a.serveDevice(context.Background(), "")
		fatal(err)
		return err
	case len(args) >= 2 && args[0] == "serve":
		a := newAgent()
		return a.serveDevice(context.Background(), args[1])
	default:
		return fmt.Errorf("usage: pandastack-guest serve DEVICE (as PID 1 it runs as the VM's init)")
	}
}

// fatal keeps PID 1 alive after an unrecoverable error, so the console shows
// the reason instead of a kernel panic.
func fatal(err error) {
	if os.Getpid() != 1 {
		return
	}
	log.Printf("fatal: %v", err)
	for {
		time.Sleep(time.Hour)
	}
}

// agent is the serving state of one guest.
type agent struct {
	procs    *procTable
	sessions int
	bootID   string
	rng      rngState
}

// newAgent is the agent's state. As the VM's init it owns the kernel RNG
// and publishes GenerationFile; in "serve" mode (tests, by hand) it leaves
// the machine's RNG alone and publishes to the file $PANDASTACK_GUEST_GENERATION
// names, if any.
func newAgent() *agent {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	rng := rngState{generation: os.Getenv(generationEnv)}
	if os.Getpid() == 1 {
		rng = rngState{dev: "/dev/urandom", generation: GenerationFile}
	}
	return &agent{procs: newProcTable(), bootID: string(trimNL(b)), rng: rng}
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
