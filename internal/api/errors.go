package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/pandastack/pandastack"
)

// codeMethodNotAllowed is the one code that exists only at the HTTP layer: a
// known path asked with a method it does not serve.
const codeMethodNotAllowed = "method_not_allowed"

// statusByCode is the one table mapping error codes to HTTP statuses.
var statusByCode = map[string]int{
	pandastack.EInvalid:        http.StatusBadRequest,
	pandastack.EUnauthorized:   http.StatusUnauthorized,
	pandastack.EForbidden:      http.StatusForbidden,
	pandastack.ENotFound:       http.StatusNotFound,
	codeMethodNotAllowed:       http.StatusMethodNotAllowed,
	pandastack.EConflict:       http.StatusConflict,
	pandastack.EGone:           http.StatusGone,
	pandastack.ETooLarge:       http.StatusRequestEntityTooLarge,
	pandastack.EOutputTooLarge: http.StatusUnprocessableEntity,
	pandastack.EQuota:          http.StatusTooManyRequests,
	pandastack.ERateLimited:    http.StatusTooManyRequests,
	pandastack.ETimeout:        http.StatusGatewayTimeout,
	pandastack.EUnavailable:    http.StatusServiceUnavailable,
	pandastack.ERefused:        http.StatusBadGateway,
	pandastack.EInternal:       http.StatusInternalServerError,

	// The host's disk for VM state is full (snapshot, fork, hibernate).
	pandastack.EInsufficientStorage: http.StatusInsufficientStorage,
}

// StatusForCode returns the HTTP status for an error code (500 for codes
// the table does not know).
func StatusForCode(code string) int {
	if st, ok := statusByCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

var (
	errMissingKey = pandastack.Errorf(pandastack.EUnauthorized, "missing API key")
	errInvalidKey = pandastack.Errorf(pandastack.EUnauthorized, "invalid API key")
	errForbidden  = pandastack.Errorf(pandastack.EForbidden, "this operation needs an admin API key")
)

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// publicError returns the code and user-facing message of err. Internal
// errors (and errors that are not *pandastack.Error) show "internal error";
// the caller logs the detail.
func publicError(err error) (code, message string) {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && pandastack.ErrorCode(err) == pandastack.EInternal:
		return pandastack.ETimeout, "the operation timed out"
	case errors.Is(err, context.Canceled) && pandastack.ErrorCode(err) == pandastack.EInternal:
		return pandastack.EUnavailable, "the request was canceled"
	}
	code = pandastack.ErrorCode(err)
	if _, known := statusByCode[code]; !known || code == pandastack.EInternal {
		return pandastack.EInternal, "internal error"
	}
	return code, pandastack.ErrorMessage(err)
}

// wireError returns err as it goes on the wire inside an NDJSON "error"
// event, logging the detail of internal errors.
func (s *Server) wireError(r *http.Request, err error) *pandastack.Error {
	code, msg := publicError(err)
	s.logError(r, code, err)
	return &pandastack.Error{Code: code, Message: msg}
}

// writeError writes err as a JSON error response. If the response has already
// started (a stream, a file download) it can no longer change the status, so
// the error is only logged.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := publicError(err)
	s.logError(r, code, err)
	if rec := recorderOf(w); rec != nil && rec.wroteHeader {
		s.log.WarnContext(r.Context(), "error after response started",
			"request_id", requestID(r), "code", code, "err", err.Error())
		return
	}
	writeErrorBody(w, code, msg)
}

func (s *Server) logError(r *http.Request, code string, err error) {
	switch {
	case code == pandastack.EInternal:
		s.log.ErrorContext(r.Context(), "internal error",
			"request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "err", err.Error())
	case StatusForCode(code) >= 500:
		// The user sees the message; the cause is for the operator.
		s.log.WarnContext(r.Context(), "request failed",
			"request_id", requestID(r), "method", r.Method, "path", r.URL.Path, "code", code, "err", err.Error())
	}
}

// writeErrorBody writes {"error":{"code","message"}} with the code's status.
func writeErrorBody(w http.ResponseWriter, code, message string) {
	writeJSON(w, StatusForCode(code), errorBody{Error: errorDetail{Code: code, Message: message}})
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values the server built reach here; a failure is a bug.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	w.Write(b) // then the newline: appending it could copy a large b whole
	w.Write([]byte{'\n'})
}
