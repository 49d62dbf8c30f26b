package mcp

import (
	"fmt"
	"unicode/utf8"
)

// maxStreamBytes caps the output of each stream an exec returns: an agent's
// context is precious, and a command may print gigabytes.
const maxStreamBytes = 100 << 10

// capture keeps the head and the tail of a stream, at most limit bytes in
// all, and counts what it drops. Feed it with write (an OnStdout/OnStderr
// callback); it holds O(limit) memory whatever the stream's size.
type capture struct {
	limit int
	head  []byte // the first limit/2 bytes
	tail  []byte // the latest bytes after head; trimmed to limit-limit/2 by text
	total int64  // bytes seen
}

func newCapture(limit int) *capture { return &capture{limit: limit} }

func (c *capture) write(b []byte) {
	c.total += int64(len(b))
	if room := c.limit/2 - len(c.head); room > 0 {
		n := min(room, len(b))
		c.head = append(c.head, b[:n]...)
		b = b[n:]
	}
	c.tail = append(c.tail, b...)
	// Trim now and then, not on every write: keep at most twice the tail.
	if keep := c.limit - c.limit/2; len(c.tail) > 2*keep {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-keep:]...)
	}
}

// text returns the stream, or its head and tail around a note saying how
// much was left out, and whether it was truncated.
func (c *capture) text() (string, bool) {
	if c.total <= int64(c.limit) {
		return string(c.head) + string(c.tail), false
	}
	tail := c.tail[len(c.tail)-(c.limit-c.limit/2):]
	head := trimRuneEnd(c.head)
	tail = trimRuneStart(tail)
	omitted := c.total - int64(len(head)) - int64(len(tail))
	note := fmt.Sprintf("\n[... output truncated: %d of %d bytes omitted; only the first and last %d KB of each stream are returned ...]\n",
		omitted, c.total, c.limit/2>>10)
	return string(head) + note + string(tail), true
}

// trimRuneEnd drops a UTF-8 sequence cut short at the end of b.
func trimRuneEnd(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if r, _ := utf8.DecodeRune(b[len(b)-i:]); r == utf8.RuneError && !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// trimRuneStart drops continuation bytes at the start of b (the rest of a
// sequence cut off).
func trimRuneStart(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}
