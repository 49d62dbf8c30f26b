package cowfs

import (
	"bytes"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Readahead starts reading the data (not the holes) of path into the page
// cache and returns at once: large reads, which the guest's first touches of
// pages then wait on instead of faulting them in one by one.
func Readahead(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	fd := int(f.Fd())
	st, err := f.Stat()
	if err != nil {
		return
	}
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			return
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = st.Size()
		}
		_ = unix.Fadvise(fd, data, hole-data, unix.FADV_WILLNEED)
		off = hole
	}
}

// Prefetch reads the data (not the holes) of path into the page cache, so
// that a process mapping it afterwards takes minor faults only. A clone has
// a page cache of its own, and a first touch of a page of it otherwise goes
// to the filesystem: through a loop device that costs ~10 µs a page.
func Prefetch(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	defer f.Close()
	fd := int(f.Fd())
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data past off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = st.Size()
		}
		for p := data; p < hole; {
			n := int64(len(buf))
			if hole-p < n {
				n = hole - p
			}
			k, err := unix.Pread(fd, buf[:n], p)
			if err != nil || k == 0 {
				return nil
			}
			p += int64(k)
		}
		off = hole
	}
	return nil
}

// DropCache drops the pages of path's page cache that are clean and that no
// process maps (FADV_DONTNEED): a restored VM's RAM file was read ahead
// whole, and once its guest has settled, the pages it never touched are
// cache no one will read soon. Mapped pages, what the guest uses, stay;
// dirty ones are written back in the background and stay too.
func DropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("drop cache: %w", err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("drop cache of %s: %w", path, err)
	}
	return nil
}

// Cached returns how many bytes of path are in the page cache (mincore on
// a mapping of it, which maps nothing in).
func Cached(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("cached: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, fmt.Errorf("cached: map %s: %w", path, err)
	}
	defer unix.Munmap(b)
	page := os.Getpagesize()
	vec := make([]byte, (len(b)+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, fmt.Errorf("cached: mincore %s: %w", path, e)
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page), nil
}

// DataSize returns how many bytes of path are data, not holes (SEEK_DATA
// and SEEK_HOLE; pages written but not yet on disk count).
func DataSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("data size: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("data size: %w", err)
	}
	fd := int(f.Fd())
	var n int64
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data past off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = st.Size()
		}
		n += hole - data
		off = hole
	}
	return n, nil
}

// PunchZeros turns every all-zero page of path's data into a hole and
// returns how many bytes it freed: a guest's RAM holds pages its kernel
// zeroed and never wrote again, and a hole costs a restore neither a read
// ahead nor a page of cache until the guest writes it.
func PunchZeros(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("punch zeros: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("punch zeros: %w", err)
	}
	fd := int(f.Fd())
	const page = 4096
	buf := make([]byte, 1<<20)
	var punched, runStart, runEnd int64
	flush := func() error {
		if runEnd > runStart {
			if err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, runStart, runEnd-runStart); err != nil {
				return fmt.Errorf("punch zeros in %s: %w", path, err)
			}
			punched += runEnd - runStart
		}
		runStart, runEnd = 0, 0
		return nil
	}
	for off := int64(0); off < st.Size(); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			break // ENXIO: no data past off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = st.Size()
		}
		for p := data; p < hole; {
			n := min(int64(len(buf)), hole-p)
			k, err := unix.Pread(fd, buf[:n], p)
			if err != nil || k == 0 {
				return punched, fmt.Errorf("punch zeros: read %s: %v", path, err)
			}
			for i := 0; i+page <= k; i += page {
				at := p + int64(i)
				if !zero(buf[i : i+page]) {
					if err := flush(); err != nil {
						return punched, err
					}
					continue
				}
				if runEnd != at {
					if err := flush(); err != nil {
						return punched, err
					}
					runStart = at
				}
				runEnd = at + page
			}
			p += int64(k)
		}
		off = hole
	}
	return punched, flush()
}

var zeroPage [4096]byte

func zero(b []byte) bool { return bytes.Equal(b, zeroPage[:]) }
