package e2bcompat

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// This file speaks the Connect protocol with the JSON codec, as E2B's SDKs
// use it: unary calls are a JSON body each way; server-streaming calls send
// one enveloped request message and get enveloped messages back, ended by
// an end-stream envelope. An envelope is a flags byte, a big-endian
// uint32 length and the message.

const (
	flagEndStream = 0x02
	maxMessage    = 4 << 20
)

// rpcError is a Connect error: its code and the HTTP status a unary call
// answers it with.
type rpcError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Code + ": " + e.Message }

func connectErr(code, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// rpcStatus is Connect's HTTP status for each code.
var rpcStatus = map[string]int{
	"canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504,
	"not_found": 404, "already_exists": 409, "permission_denied": 403, "resource_exhausted": 429,
	"failed_precondition": 400, "aborted": 409, "out_of_range": 400, "unimplemented": 501,
	"internal": 500, "unavailable": 503, "data_loss": 500, "unauthenticated": 401,
}

// toRPCError maps a PandaStack error (from the guest) to a Connect error.
func toRPCError(err error) *rpcError {
	if e, ok := err.(*rpcError); ok {
		return e
	}
	code := "internal"
	switch pandastack.ErrorCode(err) {
	case pandastack.ENotFound:
		code = "not_found"
	case pandastack.EConflict:
		code = "already_exists"
	case pandastack.EInvalid:
		code = "invalid_argument"
	case pandastack.EForbidden:
		code = "permission_denied"
	case pandastack.EUnauthorized:
		code = "unauthenticated"
	case pandastack.ETimeout:
		code = "deadline_exceeded"
	case pandastack.EUnavailable, pandastack.EGone:
		code = "unavailable"
	case pandastack.ETooLarge, pandastack.EQuota, pandastack.ERateLimited:
		code = "resource_exhausted"
	}
	return &rpcError{Code: code, Message: pandastack.ErrorMessage(err)}
}

func writeConnectError(w http.ResponseWriter, e *rpcError) {
	st, ok := rpcStatus[e.Code]
	if !ok {
		st = 500
	}
	writeJSON(w, st, e)
}

// readUnary decodes a unary request's JSON body into v (unknown fields
// are ignored, as proto3 JSON readers may).
func readUnary(r *http.Request, v any) *rpcError {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxMessage))
	if err != nil {
		return connectErr("invalid_argument", "read request: %v", err)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return connectErr("invalid_argument", "request is not valid JSON: %v", err)
	}
	return nil
}

// readEnvelope decodes a streaming call's single request message into v.
func readEnvelope(r *http.Request, v any) *rpcError {
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		return connectErr("invalid_argument", "read request envelope: %v", err)
	}
	if hdr[0]&0x01 != 0 {
		return connectErr("unimplemented", "compressed request messages are not supported")
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxMessage {
		return connectErr("resource_exhausted", "request message of %d bytes is too large", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		return connectErr("invalid_argument", "read request message: %v", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return connectErr("invalid_argument", "request is not valid JSON: %v", err)
	}
	return nil
}

// stream writes a server-streaming response: messages, flushed one by
// one (safe from several goroutines), then the end-stream envelope.
type stream struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
}

func newStream(w http.ResponseWriter) *stream {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// A stream lives as long as its call (a command, a watch): lift the
	// server's per-request deadlines (the request body is read by now).
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.Flush()
	return &stream{w: w, rc: rc}
}

func (s *stream) write(flags byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(b)))
	if _, err := s.w.Write(append(hdr[:], b...)); err != nil {
		s.err = err
		return err
	}
	s.err = s.rc.Flush()
	return s.err
}

// send writes one message.
func (s *stream) send(v any) error { return s.write(0, v) }

// end writes the end-stream envelope, with err when the call failed.
func (s *stream) end(err *rpcError) {
	body := map[string]any{}
	if err != nil {
		body["error"] = err
	}
	_ = s.write(flagEndStream, body)
}

// keepalive sends msg every interval until stop is closed, so that idle
// streams are not cut by proxies (the SDK asks for one every 50 s).
func (s *stream) keepalive(r *http.Request, msg any, stop <-chan struct{}) {
	interval := 50 * time.Second
	if v, err := strconv.Atoi(strings.TrimSpace(r.Header.Get("Keepalive-Ping-Interval"))); err == nil && v > 0 {
		interval = time.Duration(v) * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-r.Context().Done():
			return
		case <-t.C:
			if s.send(msg) != nil {
				return
			}
		}
	}
}

// connectTimeout is the Connect-Timeout-Ms header as seconds (0: none).
func connectTimeout(r *http.Request) float64 {
	ms, err := strconv.ParseInt(strings.TrimSpace(r.Header.Get("Connect-Timeout-Ms")), 10, 64)
	if err != nil || ms <= 0 {
		return 0
	}
	return float64(ms) / 1000
}
