// Package guestproto is the wire protocol between the host and the guest agent
// (pandastack-guest), spoken over one virtio-serial port.
//
// Two layers. The port carries frames (type byte, 4-byte big-endian length,
// payload). A Hello frame from the host starts a new session: the guest steps
// its clock, reseeds its RNG, drops whatever session it had (a VM restored from
// a snapshot still holds the session of the host that baked it) and answers
// HelloAck. Data frames carry the bytes of a yamux session, which multiplexes
// streams with per-stream flow control.
//
// Each yamux stream carries one operation: the host sends a Request packet, and
// both sides then exchange packets (type byte, 4-byte length, payload) whose
// meaning depends on the operation; see the Pkt constants.
package guestproto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// PortName is the virtio-serial port name the agent listens on.
const PortName = "pandastack.agent"

// DirectPortName is the second port of a machine that has one
// (vmm.Machine.DirectPort): not the agent's; a process in the guest opens
// it (/dev/vportNpM, found by this name under /sys/class/virtio-ports) and
// talks to the host over it on its own terms.
const DirectPortName = "pandastack.direct"

// Frame types on the serial port.
const (
	FrameHello    byte = 1 // host → guest, payload Hello
	FrameHelloAck byte = 2 // guest → host, payload HelloAck
	FrameData     byte = 3 // both ways, yamux bytes
)

// MaxFrame bounds a frame's payload.
const MaxFrame = 1 << 20

// Hello starts a session. Seed is host entropy mixed into the guest RNG.
type Hello struct {
	Session   string `json:"session"`
	UnixNanos int64  `json:"unix_nanos"`
	Seed      []byte `json:"seed"`
}

// HelloAck answers Hello.
type HelloAck struct {
	Session string `json:"session"`
	Version string `json:"version"`
	BootID  string `json:"boot_id"`
	// Restores counts the sessions since boot: 1 for a cold boot, more after
	// each restore of a snapshot.
	Sessions int `json:"sessions"`
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return fmt.Errorf("frame of %d bytes exceeds %d", len(payload), MaxFrame)
	}
	buf := make([]byte, 5+len(payload))
	buf[0] = typ
	binary.BigEndian.PutUint32(buf[1:5], uint32(len(payload)))
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame into buf (grown as needed) and returns its type
// and payload, which aliases buf.
func ReadFrame(r io.Reader, buf []byte) (byte, []byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, buf, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return 0, nil, buf, fmt.Errorf("frame of %d bytes exceeds %d", n, MaxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	p := buf[:n]
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the header promised a payload
		}
		return 0, nil, buf, err
	}
	return hdr[0], p, buf, nil
}

// Packet types inside a stream.
const (
	PktRequest  byte = 1  // host → guest: Request (JSON)
	PktOK       byte = 2  // guest → host: operation-specific JSON result
	PktError    byte = 3  // guest → host: Error (JSON); ends the operation
	PktStdout   byte = 4  // guest → host: process output
	PktStderr   byte = 5  // guest → host: process output
	PktStdin    byte = 6  // host → guest: process input
	PktStdinEOF byte = 7  // host → guest: close the process's stdin
	PktSignal   byte = 8  // host → guest: Signal (JSON)
	PktExit     byte = 9  // guest → host: Exit (JSON); ends an exec
	PktData     byte = 10 // file bytes, either way
	PktEOF      byte = 11 // end of file bytes, either way
	PktStarted  byte = 12 // guest → host: Started (JSON)
	// PktResize (host → guest, Winsize JSON) changes the size of an exec's
	// pseudo-terminal; the process gets SIGWINCH.
	PktResize byte = 13
)

// MaxPacket bounds a packet's payload.
const MaxPacket = 4 << 20

// Ops a Request can name.
const (
	OpPing    = "ping"
	OpExec    = "exec"
	OpAttach  = "attach"
	OpPs      = "ps"
	OpSignal  = "signal"
	OpRead    = "read"
	OpWrite   = "write"
	OpList    = "list"
	OpStat    = "stat"
	OpMkdir   = "mkdir"
	OpRemove  = "remove"
	OpRename  = "rename"
	OpSync    = "sync"
	OpPrepare = "prepare" // quiesce before a snapshot: sync disks
	// OpDial connects to a TCP port inside the guest; after the OK packet the
	// stream carries the connection's raw bytes both ways.
	OpDial = "dial"
	// OpWatch watches the directory Path (and, with Recursive, the tree
	// under it) for changes: after the OK packet each change is a PktData
	// packet holding a WatchEvent (JSON), until the host closes the stream.
	OpWatch = "watch"
)

// WatchEvent is one change under a watched directory. Path (and From, for a
// rename) is relative to the watched directory. Type is create, write,
// remove, rename, chmod, or overflow (the kernel dropped events: list the
// directory again).
type WatchEvent struct {
	Type  string `json:"type"`
	Path  string `json:"path,omitempty"`
	From  string `json:"from,omitempty"`
	IsDir bool   `json:"is_dir,omitempty"`
}

// Request opens an operation.
type Request struct {
	Op string `json:"op"`

	// exec: Shell is a command line for /bin/sh -c (the agent runs a simple
	// one directly); otherwise Args is the argv.
	Shell      string            `json:"shell,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Cwd        string            `json:"cwd,omitempty"`
	User       string            `json:"user,omitempty"`
	TimeoutMs  int64             `json:"timeout_ms,omitempty"`
	Background bool              `json:"background,omitempty"`
	// Follow, with Background: the stream carries the output and the
	// exit, as OpAttach would, and its closing does not kill the process.
	Follow bool `json:"follow,omitempty"`
	Stdin  bool `json:"stdin,omitempty"` // host will stream stdin packets
	// Pty runs the command on a pseudo-terminal of this size: stdin, stdout
	// and stderr are its slave side, output arrives as PktStdout (the raw
	// terminal bytes), PktStdin is typed input, PktResize resizes it and a
	// PktSignal goes to the terminal's foreground process group. With no
	// command the user's login shell runs. Foreground only.
	Pty *Winsize `json:"pty,omitempty"`

	// dial
	Port int `json:"port,omitempty"`

	// attach, signal
	PID    int    `json:"pid,omitempty"`
	Signal string `json:"signal,omitempty"`

	// files
	Path      string `json:"path,omitempty"`
	To        string `json:"to,omitempty"`
	Mode      uint32 `json:"mode,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
}

// Winsize is a terminal's size in characters.
type Winsize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Started answers an exec once the process runs.
type Started struct {
	PID int `json:"pid"`
}

// Exit ends an exec or attach.
type Exit struct {
	ExitCode   int     `json:"exit_code"`
	Signal     string  `json:"signal,omitempty"`
	TimedOut   bool    `json:"timed_out,omitempty"`
	DurationMs float64 `json:"duration_ms"`
}

// Error codes the guest returns; the host maps them to pandastack codes.
const (
	ErrNotFound   = "not_found"
	ErrExists     = "exists"
	ErrPermission = "permission_denied"
	ErrIsDir      = "is_directory"
	ErrNotDir     = "not_directory"
	ErrNotEmpty   = "not_empty"
	ErrInvalid    = "invalid_argument"
	ErrRefused    = "connection_refused"
	ErrInternal   = "internal"
)

// Error is a failed operation.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Conn reads and writes packets on one stream.
type Conn struct {
	rw  io.ReadWriter
	buf []byte
}

// NewConn wraps a stream.
func NewConn(rw io.ReadWriter) *Conn { return &Conn{rw: rw} }

// Write sends one packet.
func (c *Conn) Write(typ byte, payload []byte) error {
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if len(payload) <= 32<<10 {
		b := make([]byte, 0, 5+len(payload))
		b = append(append(b, hdr[:]...), payload...)
		_, err := c.rw.Write(b)
		return err
	}
	if _, err := c.rw.Write(hdr[:]); err != nil {
		return err
	}
	_, err := c.rw.Write(payload)
	return err
}

// WriteJSON sends one packet with a JSON payload.
func (c *Conn) WriteJSON(typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(typ, b)
}

// Read receives one packet. The payload is valid until the next Read.
func (c *Conn) Read() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(c.rw, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxPacket {
		return 0, nil, fmt.Errorf("packet of %d bytes exceeds %d", n, MaxPacket)
	}
	if cap(c.buf) < int(n) {
		c.buf = make([]byte, n)
	}
	p := c.buf[:n]
	if _, err := io.ReadFull(c.rw, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], p, nil
}

// ReadJSON receives one packet and decodes it into v when its type is want.
// A PktError packet is returned as *Error.
func (c *Conn) ReadJSON(want byte, v any) error {
	typ, p, err := c.Read()
	if err != nil {
		return err
	}
	switch typ {
	case want:
		if v == nil {
			return nil
		}
		return json.Unmarshal(p, v)
	case PktError:
		e := &Error{}
		if err := json.Unmarshal(p, e); err != nil {
			return fmt.Errorf("decode guest error: %w", err)
		}
		return e
	default:
		return fmt.Errorf("unexpected packet type %d (want %d)", typ, want)
	}
}

// The Hello exchange is on the path of every create, and under emulation
// every new code path costs: so it is a tiny binary encoding, not JSON.

// MarshalBinary encodes a Hello.
func (h Hello) MarshalBinary() []byte {
	b := appendStr(nil, h.Session)
	b = binary.BigEndian.AppendUint64(b, uint64(h.UnixNanos))
	return appendStr(b, string(h.Seed))
}

// UnmarshalHello decodes a Hello.
func UnmarshalHello(p []byte) (Hello, error) {
	var h Hello
	var ok bool
	if h.Session, p, ok = readStr(p); !ok || len(p) < 8 {
		return h, errors.New("short hello")
	}
	h.UnixNanos = int64(binary.BigEndian.Uint64(p))
	seed, _, ok := readStr(p[8:])
	if !ok {
		return h, errors.New("short hello")
	}
	h.Seed = []byte(seed)
	return h, nil
}

// MarshalBinary encodes a HelloAck.
func (a HelloAck) MarshalBinary() []byte {
	b := appendStr(nil, a.Session)
	b = binary.BigEndian.AppendUint32(b, uint32(a.Sessions))
	b = appendStr(b, a.Version)
	return appendStr(b, a.BootID)
}

// UnmarshalHelloAck decodes a HelloAck.
func UnmarshalHelloAck(p []byte) (HelloAck, error) {
	var a HelloAck
	var ok bool
	if a.Session, p, ok = readStr(p); !ok || len(p) < 4 {
		return a, errors.New("short hello ack")
	}
	a.Sessions = int(binary.BigEndian.Uint32(p))
	if a.Version, p, ok = readStr(p[4:]); !ok {
		return a, errors.New("short hello ack")
	}
	if a.BootID, _, ok = readStr(p); !ok {
		return a, errors.New("short hello ack")
	}
	return a, nil
}

func appendStr(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255]
	}
	return append(append(b, byte(len(s))), s...)
}

func readStr(p []byte) (string, []byte, bool) {
	if len(p) < 1 || len(p) < 1+int(p[0]) {
		return "", nil, false
	}
	n := int(p[0])
	return string(p[1 : 1+n]), p[1+n:], true
}
