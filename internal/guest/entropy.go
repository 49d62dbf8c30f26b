package guest

import (
	"encoding/binary"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stepClock sets the wall clock to the host's time: a VM restored from a
// snapshot wakes up with the time of the bake.
func stepClock(unixNanos int64) error {
	if unixNanos <= 0 {
		return nil
	}
	ts := unix.NsecToTimespec(unixNanos)
	return unix.ClockSettime(unix.CLOCK_REALTIME, &ts)
}

// reseed mixes host entropy into the kernel RNG and credits it, so clones
// restored from one snapshot do not share random streams.
func reseed(seed []byte) error {
	if len(seed) == 0 {
		return nil
	}
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	buf := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(buf[0:4], uint32(len(seed)*8))
	binary.NativeEndian.PutUint32(buf[4:8], uint32(len(seed)))
	copy(buf[8:], seed)
	const rndAddEntropy = 0x40085203 // _IOW('R', 0x03, int[2])
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndAddEntropy, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
		// Without CAP_SYS_ADMIN (tests), writing still mixes the bytes in.
		_, err := f.Write(seed)
		return err
	}
	const rndReseedCRNG = 0x5207 // _IO('R', 0x07)
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, f.Fd(), rndReseedCRNG, 0)
	return nil
}
