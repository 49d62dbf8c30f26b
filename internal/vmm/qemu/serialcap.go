package qemu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
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

// capLog cuts the log at path to its newest max/2 bytes (from a line
// start) behind a marker line when it is longer than max, and returns how
// many bytes it cut. QEMU appends to the log (append=on), so its writes
// go on after the kept tail; a few bytes written while the log is cut may
// be lost, which is fine for a console log. The directory is the VM
// uid's: the log is opened without following a symlink, and only a plain
// file of its own is touched.
func capLog(path string, max int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || st.Nlink != 1 {
		return 0, fmt.Errorf("%s is not a plain file of its own: left alone", path)
	}
	size := fi.Size()
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
	marker := fmt.Sprintf("[pandastack: console log capped at %d bytes: %d earlier bytes were cut]\n", max, cut)
	if _, err := f.Write(append([]byte(marker), keep...)); err != nil {
		return cut, fmt.Errorf("write %s: %w", path, err)
	}
	return cut, nil
}
