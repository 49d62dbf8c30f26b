package pandastack

import (
	"errors"
	"fmt"
)

// Error codes users see in {"error":{"code":...}}. The HTTP layer maps each
// to a status in one table (internal/api).
const (
	EInvalid        = "invalid_argument"
	ENotFound       = "not_found"
	EConflict       = "conflict"
	EUnauthorized   = "unauthorized"
	EForbidden      = "forbidden"
	ETimeout        = "timeout"
	EGone           = "gone" // the sandbox was killed or expired
	ETooLarge       = "too_large"
	EOutputTooLarge = "output_too_large"
	ERateLimited    = "rate_limited"
	EQuota          = "quota_exceeded"
	EUnavailable    = "unavailable"
	ERefused        = "connection_refused" // nothing listens on a sandbox port
	EInternal       = "internal"

	// EInsufficientStorage: the host's disk for VM state is full (nothing
	// was saved and the sandbox runs on), or cannot hold a volume of the
	// size asked for (nothing was made).
	EInsufficientStorage = "insufficient_storage"
)

// Error is an error with a code a user can act on. Message is safe to show a
// user; Err keeps the details for logs.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Err     error  `json:"-"`
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EInternal.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the user-facing message of err: the *Error's message,
// or a generic text for internal errors (whose details go to logs only).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
