package qemu

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Under TCG, QEMU writes the host code it translates the guest's into a
// buffer it maps at its start (1 GiB, anonymous, read-write-execute) and
// asks transparent huge pages for. The kernel backs each 2 MiB of it at
// its first write with a huge page it zeroes first, in the vCPU thread
// that is translating. A restored guest's first call translates 16–18 MiB
// of code (a function's first invocation, measured), so its QEMU stops
// eight or nine times to zero 2 MiB: on these hosts ~16 ms of a fresh
// invocation's ~230 ms (perf, 2026-12-07). A pooled process has nothing
// to do while it waits for its restore: prefaultCode faults in the start
// of its buffer then, off the restore's path.

// codePrefault is how much of a pooled process's code buffer is faulted in
// ahead: what one restore's first call translates, with room.
const codePrefault = 24 << 20

// minCodeBuffer tells QEMU's code buffer from its other mappings: the only
// anonymous read-write-execute one, and far larger than any other.
const minCodeBuffer = 256 << 20

// hugePage is the size of a transparent huge page (x86-64).
const hugePage = 2 << 20

// prefaultCode faults in v's TCG code buffer from its second huge page up
// to codePrefault, writing through /proc/PID/mem. Nothing of QEMU's is
// there yet: before its first translation QEMU has written only its
// prologue, at the start (the first huge page, left alone), and a process
// waiting for its incoming state translates nothing. Each 4 KiB page gets
// a stamp of its own (the pid and its index; QEMU writes a translation
// block's every field itself, since after a flush it reuses the buffer as
// it is): zeroed pages the kernel's same-page merging (ksm.go) would merge
// away again. A process without such a buffer (KVM) is left alone; one
// whose buffer holds more than the prologue's huge page is too.
func (v *vm) prefaultCode() error {
	start, size, rss, err := codeBuffer(v.pid)
	if err != nil || size == 0 {
		return err
	}
	if rss > hugePage {
		return fmt.Errorf("prefault code buffer: %d KiB of it in use already", rss>>10)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", v.pid), os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("prefault code buffer: %w", err)
	}
	defer f.Close()
	buf := make([]byte, hugePage)
	for off := int64(hugePage); off < min(size, codePrefault); off += hugePage {
		for p := 0; p < hugePage; p += 4096 {
			binary.LittleEndian.PutUint64(buf[p:], uint64(v.pid)<<32|uint64(off+int64(p))>>12)
		}
		if _, err := f.WriteAt(buf, start+off); err != nil {
			return fmt.Errorf("prefault code buffer: %w", err)
		}
	}
	return nil
}

// codeBuffer finds process pid's TCG code buffer: its start, its size
// (0 when it has none) and how much of it is resident, from its smaps.
func codeBuffer(pid int) (start, size, rss int64, err error) {
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("find code buffer: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	found := false
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if found && len(f) == 3 && string(f[0]) == "Rss:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			return start, size, kb << 10, err
		}
		// "7f5f04000000-7f5f43fff000 rwxp 00000000 00:00 0" (no path: anonymous)
		if len(f) != 5 || string(f[1]) != "rwxp" || string(f[4]) != "0" {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(string(lo), 16, 64)
		b, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err := errors.Join(err1, err2); err != nil || b-a < minCodeBuffer || a%hugePage != 0 {
			continue
		}
		start, size, found = int64(a), int64(b-a), true
	}
	if found {
		return 0, 0, 0, errors.New("find code buffer: no Rss line")
	}
	return 0, 0, 0, sc.Err()
}
