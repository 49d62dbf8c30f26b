package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMaxSerialLog caps each VM's serial console log (serial.log in its
// directory). A guest can write its console as fast as QEMU emulates the
// UART, forever; past the cap the log keeps its newest half behind a line
// saying how much was cut.
const DefaultMaxSerialLog = 1 << 20

// serialCapEvery is how often the logs are looked at: a guest writing
// flat out adds a few MB between two looks, so the log stays within a
// small multiple of the cap.
const serialCapEvery = time.Second

// capSerialLogs keeps every VM's serial log under max until ctx ends.
func (d *Driver) capSerialLogs(ctx context.Context, max int64) {
	t := time.NewTicker(serialCapEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ids, err := d.List()
		if err != nil {
			continue
		}
		for _, id := range ids {
			path := filepath.Join(d.cfg.Dir, id, serialLog)
			cut, err := capLog(path, max)
			if err != nil {
				d.log.Warn("cap serial log", "vm", id, "err", err)
			} else if cut > 0 {
				d.log.Debug("serial log capped", "vm", id, "cut_bytes", cut)
			}
		}
	}
}

// capLog cuts the log at path to about its newest max/2 bytes behind a
// marker line when it is longer than max, and returns how many bytes it
// cut. The VM's directory is its uid's: the log is opened without
// following a symlink, and only a plain file of its own is touched.
//
// On XFS and ext4 the head is cut in place (FALLOC_FL_COLLAPSE_RANGE, at
// block boundaries) and the marker put in front (FALLOC_FL_INSERT_RANGE):
// the kernel orders both with QEMU's appends, so nothing QEMU writes
// meanwhile is lost or lands before the marker. Elsewhere the log is
// rewritten (capByRewrite).
func capLog(path string, max int64) (int64, error) {
	f, size, err := openLog(path, os.O_RDWR)
	if f == nil || err != nil {
		return 0, err
	}
	defer f.Close()
	if size <= max {
		return 0, nil
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &sfs); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	blk := sfs.Bsize
	cut := (size - max/2) / blk * blk
	if blk <= 0 || blk > max/4 || cut <= 0 {
		return capByRewrite(path, max)
	}
	err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_COLLAPSE_RANGE, 0, cut)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) {
		return capByRewrite(path, max)
	}
	if err != nil {
		return 0, fmt.Errorf("cut the head of %s: %w", path, err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_INSERT_RANGE, 0, blk); err != nil {
		return cut, nil // cut, without a marker
	}
	if _, err := f.WriteAt(marker(max, cut, int(blk)), 0); err != nil {
		return cut, fmt.Errorf("mark %s: %w", path, err)
	}
	return cut, nil
}

// marker is the line put in front of a capped log, padded with spaces to
// n bytes (n = 0: not padded).
func marker(max, cut int64, n int) []byte {
	m := []byte(fmt.Sprintf("[pandastack: console log capped at %d bytes: %d earlier bytes were cut]", max, cut))
	if len(m)+1 < n {
		m = append(m, bytes.Repeat([]byte(" "), n-len(m)-1)...)
	}
	return append(m, '\n')
}

// openLog opens the log at path (nil, no error, when there is none) if it
// is a plain file with one link, and returns its size.
func openLog(path string, flag int) (*os.File, int64, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if os.IsNotExist(err) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Nlink != 1 {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a plain file of its own: left alone", path)
	}
	return f, fi.Size(), nil
}

// capByRewrite cuts the log at path to its newest max/2 bytes (from a line
// start) behind a marker line: it reads the tail, empties the file and
// appends marker and tail. QEMU appends too (append=on), so its writes go
// on after them; what it writes while the log is cut may land before the
// marker or be lost, which is fine for a console log on a filesystem that
// cannot cut in place.
func capByRewrite(path string, max int64) (int64, error) {
	f, size, err := openLog(path, os.O_RDWR|os.O_APPEND)
	if f == nil || err != nil {
		return 0, err
	}
	defer f.Close()
	if size <= max {
		return 0, nil
	}
	keep := make([]byte, max/2)
	n, err := f.ReadAt(keep, size-int64(len(keep)))
	if err != nil && err != io.EOF {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	keep = keep[:n]
	if i := bytes.IndexByte(keep, '\n'); i >= 0 && i < len(keep)-1 {
		keep = keep[i+1:]
	}
	cut := size - int64(len(keep))
	if err := f.Truncate(0); err != nil {
		return 0, fmt.Errorf("truncate %s: %w", path, err)
	}
	if _, err := f.Write(append(marker(max, cut, 0), keep...)); err != nil {
		return cut, fmt.Errorf("write %s: %w", path, err)
	}
	return cut, nil
}
