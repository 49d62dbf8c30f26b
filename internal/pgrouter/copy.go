package pgrouter

import (
	"io"
	"sync"
)

// A routed connection spends most of its life idle — a pooled client
// holds its connection open between transactions — with a copy blocked in
// Read each way. A copy with its own 32 KiB buffer (io.Copy) holds 64 KiB
// per idle connection, 64 MiB for 1,000. copyLean holds a small buffer
// while it waits and borrows a large one from a pool only while data
// keeps coming in full reads (a big result, a COPY).

const (
	// idleBufSize is what a waiting copy holds: a PostgreSQL query or a
	// small result fits in one read.
	idleBufSize = 1 << 10
	busyBufSize = 32 << 10
)

var busyBufs = sync.Pool{New: func() any { b := make([]byte, busyBufSize); return &b }}

// copyLean copies src to dst until src ends (nil) or either fails.
func copyLean(dst io.Writer, src io.Reader) error {
	small := make([]byte, idleBufSize)
	for {
		n, err := src.Read(small)
		if n > 0 {
			if _, werr := dst.Write(small[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return eofIsNil(err)
		}
		if n < len(small) {
			continue
		}
		if err := drain(dst, src); err != nil {
			return eofIsNil(err)
		}
	}
}

// drain copies with a pooled large buffer until a read comes back short
// (the burst is over) and returns the buffer.
func drain(dst io.Writer, src io.Reader) error {
	bp := busyBufs.Get().(*[]byte)
	defer busyBufs.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
		if n < len(buf) {
			return nil
		}
	}
}

func eofIsNil(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}
