package terminals

// ring keeps the last max bytes of a stream, addressed by absolute offset
// (bytes since the stream began).
type ring struct {
	buf   []byte
	max   int
	start int64 // offset of buf[0]
}

func newRing(max int) *ring { return &ring{max: max} }

// end is the offset just past the last byte written.
func (r *ring) end() int64 { return r.start + int64(len(r.buf)) }

func (r *ring) write(p []byte) {
	if len(p) >= r.max {
		r.start += int64(len(r.buf) + len(p) - r.max)
		r.buf = append(r.buf[:0], p[len(p)-r.max:]...)
		return
	}
	if over := len(r.buf) + len(p) - r.max; over > 0 {
		// Drop the oldest bytes; compact so the buffer never grows past max.
		n := copy(r.buf, r.buf[over:])
		r.buf = r.buf[:n]
		r.start += int64(over)
	}
	r.buf = append(r.buf, p...)
}

// since returns a copy of the bytes from offset from (or from the oldest
// kept, if from was dropped) to the end, and the offset they start at.
func (r *ring) since(from int64) ([]byte, int64) {
	if from < r.start {
		from = r.start
	}
	if from >= r.end() {
		return nil, r.end()
	}
	return append([]byte(nil), r.buf[from-r.start:]...), from
}
