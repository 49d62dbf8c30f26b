package pgrouter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// Request codes of the untyped first packet a PostgreSQL client sends
// (protocol docs, "Message Formats"): the protocol version of a
// StartupMessage, or one of these.
const (
	codeCancel   = 80877102
	codeSSL      = 80877103
	codeGSSEnc   = 80877104
	protocol3    = 3 << 16
	maxStartup   = 10000 // what PostgreSQL itself accepts (MAX_STARTUP_PACKET_LENGTH)
	minStartup   = 8
	sslAccepted  = 'S'
	gssDeclined  = 'N'
	errorMessage = 'E'
)

// SQLSTATE codes the router answers with.
const (
	stateInvalidAuthSpec = "28000" // invalid_authorization_specification
	stateProtocol        = "08P01" // protocol_violation
	stateUnknownDatabase = "3D000" // invalid_catalog_name
	stateUnavailable     = "57P03" // cannot_connect_now
)

// packet is a client's untyped first packet: its code (a request code or
// a protocol version) and the bytes after it.
type packet struct {
	code uint32
	body []byte
}

// readPacket reads one length-prefixed untyped packet (SSLRequest,
// GSSENCRequest, CancelRequest or StartupMessage).
func readPacket(r io.Reader) (packet, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return packet{}, fmt.Errorf("read startup packet: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < minStartup || n > maxStartup {
		return packet{}, fmt.Errorf("startup packet of %d bytes (want %d to %d)", n, minStartup, maxStartup)
	}
	p := packet{code: binary.BigEndian.Uint32(hdr[4:]), body: make([]byte, n-8)}
	if _, err := io.ReadFull(r, p.body); err != nil {
		return packet{}, fmt.Errorf("read startup packet: %w", err)
	}
	return p, nil
}

// startup is a StartupMessage's parameters, in the order the client sent
// them (user, database, options, application_name, ...).
type startup struct {
	keys   []string
	values map[string]string
}

// parseStartup decodes a protocol-3 StartupMessage body: NUL-terminated
// name/value pairs, then a final NUL. Names must be unique and "user" is
// required, as PostgreSQL requires.
func parseStartup(body []byte) (startup, error) {
	s := startup{values: map[string]string{}}
	for {
		if len(body) == 0 {
			return s, fmt.Errorf("startup message is not terminated")
		}
		if body[0] == 0 {
			if len(body) != 1 {
				return s, fmt.Errorf("startup message has bytes after its end")
			}
			break
		}
		k, rest, ok := bytes.Cut(body, []byte{0})
		if !ok {
			return s, fmt.Errorf("startup message parameter name is not terminated")
		}
		v, rest, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return s, fmt.Errorf("startup message parameter %q has no terminated value", k)
		}
		if _, dup := s.values[string(k)]; dup {
			return s, fmt.Errorf("startup message repeats parameter %q", k)
		}
		s.keys = append(s.keys, string(k))
		s.values[string(k)] = string(v)
		body = rest
	}
	if s.values["user"] == "" {
		return s, fmt.Errorf("startup message names no user")
	}
	return s, nil
}

// set changes (or adds) a parameter; an empty value removes it.
func (s *startup) set(k, v string) {
	if _, ok := s.values[k]; !ok {
		if v == "" {
			return
		}
		s.keys = append(s.keys, k)
	}
	if v == "" {
		delete(s.values, k)
		for i, key := range s.keys {
			if key == k {
				s.keys = append(s.keys[:i], s.keys[i+1:]...)
				break
			}
		}
		return
	}
	s.values[k] = v
}

// encode returns the StartupMessage (protocol 3.0) with its length.
func (s startup) encode() []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, 0, 0})
	_ = binary.Write(&b, binary.BigEndian, uint32(protocol3))
	for _, k := range s.keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(s.values[k])
		b.WriteByte(0)
	}
	b.WriteByte(0)
	out := b.Bytes()
	binary.BigEndian.PutUint32(out, uint32(len(out)))
	return out
}

// errorResponse is a FATAL ErrorResponse message with a SQLSTATE code and
// a message: what a client prints ("FATAL:  message").
func errorResponse(code, message string) []byte {
	var b bytes.Buffer
	b.WriteByte(errorMessage)
	b.Write([]byte{0, 0, 0, 0})
	for _, f := range []struct {
		t byte
		v string
	}{{'S', "FATAL"}, {'V', "FATAL"}, {'C', code}, {'M', strings.ReplaceAll(message, "\x00", "")}} {
		b.WriteByte(f.t)
		b.WriteString(f.v)
		b.WriteByte(0)
	}
	b.WriteByte(0)
	out := b.Bytes()
	binary.BigEndian.PutUint32(out[1:], uint32(len(out)-1))
	return out
}
