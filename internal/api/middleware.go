package api

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/pandastack/pandastack"
)

// RequestIDHeader carries a request's id: the client's, when it sends a
// sane one, else a fresh one. It is echoed on every response and logged.
const RequestIDHeader = "X-Request-Id"

type ctxKey int

const requestKey ctxKey = 0

// requestState is per-request information the middleware shares with the
// handlers; the authenticator fills in the principal.
type requestState struct {
	id        string
	principal *principal
}

func stateOf(r *http.Request) *requestState {
	st, _ := r.Context().Value(requestKey).(*requestState)
	return st
}

func requestID(r *http.Request) string {
	if st := stateOf(r); st != nil {
		return st.id
	}
	return ""
}

// middleware gives each request an id, logs it when it ends and turns a
// panic into a 500.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &requestState{id: r.Header.Get(RequestIDHeader)}
		if !validRequestID(st.id) {
			st.id = newRequestID()
		}
		r = r.WithContext(context.WithValue(r.Context(), requestKey, st))
		rec := &recorder{ResponseWriter: w}
		rec.Header().Set(RequestIDHeader, st.id)
		s.boundBody(rec, r)

		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					s.logRequest(r, st, rec, start)
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic serving request", "request_id", st.id,
					"method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				if !rec.wroteHeader {
					writeErrorBody(rec, pandastack.EInternal, "internal error")
				}
			}
			s.logRequest(r, st, rec, start)
		}()
		next.ServeHTTP(rec, r)
	})
}

func (s *Server) logRequest(r *http.Request, st *requestState, rec *recorder, start time.Time) {
	status := rec.status
	if !rec.wroteHeader {
		status = http.StatusOK
	}
	attrs := []any{
		"request_id", st.id,
		"method", r.Method,
		"path", r.URL.Path,
		"status", status,
		"duration", time.Since(start),
		"bytes", rec.bytes,
	}
	if p := st.principal; p != nil {
		attrs = append(attrs, "team", p.team.Name, "team_id", p.team.ID, "key", p.key.Prefix)
	}
	s.log.InfoContext(r.Context(), "request", attrs...)
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		ok := c == '-' || c == '_' || c == '.' || c == ':' ||
			('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b[:])
}

// recorder remembers the status and size of a response. It keeps
// http.ResponseController working (Flush, deadlines) through Unwrap.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	bytes       int64
}

func (w *recorder) WriteHeader(status int) {
	if !w.wroteHeader {
		w.status = status
		w.wroteHeader = true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) Flush() { w.FlushError() }

func (w *recorder) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recorderOf finds the middleware's recorder under w, if any.
func recorderOf(w http.ResponseWriter) *recorder {
	for {
		switch x := w.(type) {
		case *recorder:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// flush pushes buffered response bytes to the client.
func flush(w http.ResponseWriter) error {
	err := http.NewResponseController(w).Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil
	}
	return err
}

// noWriteDeadline lifts the server's write timeout for a long response (a
// stream or a download); the stream ends when the work does.
func noWriteDeadline(w http.ResponseWriter) {
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
}

// noReadDeadline lifts the server's read timeout for a long upload.
func noReadDeadline(w http.ResponseWriter) {
	http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// boundBody gives the request's body BodyReadTimeout to arrive: a client
// that sends headers and then trickles (or stops) gets a 400 and is let go
// instead of holding a connection and a goroutine. It is a deadline on the
// connection's reads, not on the request's context: net/http clears it once
// the body has been read (then it watches the connection for a close), so
// a long streamed response is never cut. Streaming uploads lift it
// themselves (noReadDeadline), as the router does for proxied requests.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) {
	if s.cfg.BodyReadTimeout < 0 || r.Body == nil || r.Body == http.NoBody {
		return
	}
	if http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)) != nil {
		return
	}
	r.Body = &boundedBody{ReadCloser: r.Body, limit: s.cfg.BodyReadTimeout}
}

// boundedBody says why a read failed when the body deadline passed.
type boundedBody struct {
	io.ReadCloser
	limit time.Duration
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, pandastack.Errorf(pandastack.EInvalid, "the request body did not arrive within %s", b.limit)
	}
	return n, err
}
