package guest

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// GenerationFile is where the agent publishes a fresh random token each time
// a host greets it — after a cold boot and after every restore of a
// snapshot (create from a template, fork, wake, restore). Processes that
// were running when the snapshot was taken, and so share their userspace
// random state with every other clone, compare it with the token they last
// saw and reseed their generators when it changed (the code-interpreter
// kernel does this before each run). It is written after the kernel RNG has
// been reseeded, so reseeding from /dev/urandom then gives each clone its
// own stream. It is not a secret.
const GenerationFile = "/run/pandastack/generation"

// generationEnv names a file to publish the generation token to when the
// agent is not PID 1 ("serve" mode, tests); unset, it publishes none.
const generationEnv = "PANDASTACK_GUEST_GENERATION"

// rngState is what the agent reseeds after a restore.
type rngState struct {
	// dev is the kernel RNG device to reseed; "" leaves the kernel's RNG
	// alone (an agent that is not the VM's init does not own it).
	dev string
	// generation is the file to publish the token to ("" for none).
	generation string
}

// restored makes this VM's randomness its own after a Hello: it mixes the
// host's seed into the kernel RNG, forces the CRNG to reseed from it, then
// publishes a new generation token. Hello is answered only after it, so
// the host hands out no sandbox whose kernel RNG is still the snapshot's.
func (r rngState) restored(seed []byte) error {
	if r.dev != "" {
		if err := reseed(r.dev, seed); err != nil {
			return err
		}
	}
	if r.generation != "" {
		if err := publishGeneration(r.generation); err != nil {
			return fmt.Errorf("publish rng generation: %w", err)
		}
	}
	return nil
}

// stepClock sets the wall clock to the host's time: a VM restored from a
// snapshot wakes up with the time of the bake.
func stepClock(unixNanos int64) error {
	if unixNanos <= 0 {
		return nil
	}
	ts := unix.NsecToTimespec(unixNanos)
	return unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
}

// ioctls of the random device (linux/random.h).
const (
	rndAddEntropy = 0x40085203 // RNDADDENTROPY: _IOW('R', 0x03, int[2])
	rndReseedCRNG = 0x5207     // RNDRESEEDCRNG: _IO('R', 0x07)
)

// reseed mixes host entropy into the kernel RNG of dev (/dev/urandom),
// credits it, and makes the CRNG reseed at once: without the last step the
// kernel would keep generating from the snapshot's key until its next
// scheduled reseed (up to a minute). Clones restored from one snapshot then
// no longer share the kernel's random streams.
func reseed(dev string, seed []byte) error {
	if len(seed) == 0 {
		return fmt.Errorf("reseed rng: no seed from the host")
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("reseed rng: %w", err)
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	buf := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(buf[0:4], uint32(len(seed)*8))
	binary.NativeEndian.PutUint32(buf[4:8], uint32(len(seed)))
	copy(buf[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndAddEntropy, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		// Without CAP_SYS_ADMIN, writing still mixes the bytes in, uncredited.
		if _, err := f.Write(seed); err != nil {
			return fmt.Errorf("reseed rng: mix in seed: %w", err)
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndReseedCRNG, 0); e != 0 {
		return fmt.Errorf("reseed rng: RNDRESEEDCRNG on %s: %w", dev, e)
	}
	return nil
}

// publishGeneration writes a new random token over the one in path (made,
// with its directory, the first time), readable by every user. It is one
// write of a fixed size at offset 0, no temporary file and rename: a
// reader racing it can only see a token that differs from the one it knew,
// which is what the write means anyway, and the work sits on the path of
// every create (fewer guest syscalls, less for TCG to translate).
func publishGeneration(path string) error {
	var tok [16]byte
	if _, err := unix.Getrandom(tok[:], 0); err != nil {
		return fmt.Errorf("read random token: %w", err)
	}
	line := []byte(hex.EncodeToString(tok[:]) + "\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(line, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
