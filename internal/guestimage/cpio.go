package guestimage

import (
	"fmt"
	"io"
	"strings"
)

// File type bits of a cpio entry's mode (as in stat(2)).
const (
	cpioTypeDir  = 0o040000
	cpioTypeReg  = 0o100000
	cpioTypeChar = 0o020000
)

// newcMagic starts every header of a "newc" (SVR4 without checksum) archive,
// the format the kernel unpacks an initramfs from.
const newcMagic = "070701"

// newcHeaderLen is the length of a newc header: the magic and 13 fields of
// eight hex digits.
const newcHeaderLen = 6 + 13*8

// cpioWriter writes a newc cpio archive. Entries get inode numbers counting
// from 1, uid and gid 0 and mtime 0, so the same entries always make the
// same bytes. Names are written as given (no leading "/", by convention).
type cpioWriter struct {
	w   io.Writer
	ino uint32
	off int64 // bytes written so far, for padding
	err error // first write error; later calls do nothing
}

func newCpioWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w} }

// Dir adds a directory with permission bits perm (such as 0o755).
func (c *cpioWriter) Dir(name string, perm uint32) error {
	return c.entry(name, cpioTypeDir|perm&0o7777, 2, 0, 0, 0, nil)
}

// CharDev adds a character device node.
func (c *cpioWriter) CharDev(name string, perm, major, minor uint32) error {
	return c.entry(name, cpioTypeChar|perm&0o7777, 1, 0, major, minor, nil)
}

// File adds a regular file of size bytes read from r.
func (c *cpioWriter) File(name string, perm uint32, size int64, r io.Reader) error {
	return c.entry(name, cpioTypeReg|perm&0o7777, 1, size, 0, 0, r)
}

// Close writes the trailer entry and pads the archive to a multiple of 512
// bytes, as cpio(1) does. It does not close the underlying writer.
func (c *cpioWriter) Close() error {
	if err := c.entry("TRAILER!!!", 0, 1, 0, 0, 0, nil); err != nil {
		return err
	}
	c.pad(512)
	return c.err
}

func (c *cpioWriter) entry(name string, mode, nlink uint32, size int64, rdevMajor, rdevMinor uint32, r io.Reader) error {
	if c.err != nil {
		return c.err
	}
	if name == "" || strings.ContainsRune(name, 0) {
		return fmt.Errorf("cpio: bad entry name %q", name)
	}
	if size < 0 || size > 0xffffffff {
		return fmt.Errorf("cpio: %s: size %d does not fit the newc format", name, size)
	}
	ino := uint32(0)
	if name != "TRAILER!!!" {
		c.ino++
		ino = c.ino
	}
	hdr := fmt.Sprintf("%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		newcMagic,
		ino,
		mode,
		0,     // uid
		0,     // gid
		nlink, //
		0,     // mtime
		size,
		0, 0, // devmajor, devminor of the file system holding the file
		rdevMajor, rdevMinor,
		len(name)+1, // name size, with its NUL
		0,           // check (only used by the "crc" format)
	)
	c.write([]byte(hdr))
	c.write([]byte(name + "\x00"))
	c.pad(4)
	if size > 0 {
		if c.err != nil {
			return c.err
		}
		n, err := io.CopyN(c.w, r, size)
		c.off += n
		if err != nil {
			c.err = fmt.Errorf("cpio: %s: copy data: %w", name, err)
			return c.err
		}
		c.pad(4)
	}
	return c.err
}

func (c *cpioWriter) write(p []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(p)
	c.off += int64(n)
	if err != nil {
		c.err = fmt.Errorf("cpio: write: %w", err)
	}
}

// pad writes NULs up to the next multiple of align.
func (c *cpioWriter) pad(align int64) {
	if rem := c.off % align; rem != 0 {
		c.write(make([]byte, align-rem))
	}
}
