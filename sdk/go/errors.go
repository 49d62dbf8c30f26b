package pandastack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// APIError is an error answered by the server.
type APIError struct {
	// Status is the HTTP status, or 0 for an error reported inside a stream
	// (after the response had started).
	Status    int
	Code      string // e.g. "not_found"; see the Err* values
	Message   string
	RequestID string // the X-Request-Id of the request, for support
	// RetryAfter is how long the server asked the client to wait before
	// trying again (its Retry-After header; rate_limited answers carry
	// one), or 0.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	return "pandastack: " + e.Code + ": " + e.Message
}

// Is makes errors.Is(err, ErrNotFound) (and the other Err* values) true for
// every APIError with that code.
func (e *APIError) Is(target error) bool {
	t, ok := target.(*APIError)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Values to compare errors with (errors.Is) by code.
var (
	ErrInvalid          = &APIError{Code: "invalid_argument"}
	ErrUnauthorized     = &APIError{Code: "unauthorized"}
	ErrForbidden        = &APIError{Code: "forbidden"}
	ErrNotFound         = &APIError{Code: "not_found"}
	ErrMethodNotAllowed = &APIError{Code: "method_not_allowed"}
	ErrConflict         = &APIError{Code: "conflict"}
	ErrGone             = &APIError{Code: "gone"}
	ErrTooLarge         = &APIError{Code: "too_large"}
	ErrOutputTooLarge   = &APIError{Code: "output_too_large"}
	ErrQuotaExceeded    = &APIError{Code: "quota_exceeded"}
	ErrRateLimited      = &APIError{Code: "rate_limited"}
	ErrTimeout          = &APIError{Code: "timeout"}
	ErrUnavailable      = &APIError{Code: "unavailable"}
	// ErrInsufficientStorage: the host's disk is full; a snapshot, fork or
	// hibernate saved nothing and the sandbox runs on; or a volume of the
	// size asked for does not fit (HTTP 507).
	ErrInsufficientStorage = &APIError{Code: "insufficient_storage"}
	ErrInternal            = &APIError{Code: "internal"}
)

// IsNotFound reports whether err says the thing does not exist (or belongs
// to another team).
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsUnauthorized reports whether the API key is missing or invalid.
func IsUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// IsForbidden reports whether the key may not do this (e.g. needs admin).
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }

// IsGone reports whether the sandbox has been killed or has expired.
func IsGone(err error) bool { return errors.Is(err, ErrGone) }

// IsInvalid reports whether the request was invalid.
func IsInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

// IsConflict reports a conflict (e.g. removing a non-empty directory).
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsQuotaExceeded reports that the team is at one of its quotas (the
// message names it: max_sandboxes, max_snapshots, max_vcpus, ...); waiting
// does not help, freeing something (or a higher quota) does.
func IsQuotaExceeded(err error) bool { return errors.Is(err, ErrQuotaExceeded) }

// IsRateLimited reports that the client should slow down: the API key sent
// more than its team's requests_per_second. RetryAfter (via errors.As on
// *APIError) says how long to wait.
func IsRateLimited(err error) bool { return errors.Is(err, ErrRateLimited) }

// IsTimeout reports that the server timed out.
func IsTimeout(err error) bool { return errors.Is(err, ErrTimeout) }

// IsUnavailable reports that the server cannot serve the request now.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// codeForStatus guesses a code for an error answer that is not the API's
// JSON (e.g. from a proxy).
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return ErrInvalid.Code
	case http.StatusUnauthorized:
		return ErrUnauthorized.Code
	case http.StatusForbidden:
		return ErrForbidden.Code
	case http.StatusNotFound:
		return ErrNotFound.Code
	case http.StatusMethodNotAllowed:
		return ErrMethodNotAllowed.Code
	case http.StatusConflict:
		return ErrConflict.Code
	case http.StatusGone:
		return ErrGone.Code
	case http.StatusRequestEntityTooLarge:
		return ErrTooLarge.Code
	case http.StatusTooManyRequests:
		return ErrRateLimited.Code
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return ErrUnavailable.Code
	case http.StatusGatewayTimeout:
		return ErrTimeout.Code
	case http.StatusInsufficientStorage:
		return ErrInsufficientStorage.Code
	}
	return ErrInternal.Code
}

// readAPIError turns an error response into an *APIError.
func readAPIError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	var wire struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Error.Code != "" {
		e.Code, e.Message = wire.Error.Code, wire.Error.Message
		return e
	}
	e.Code = codeForStatus(resp.StatusCode)
	e.Message = strings.TrimSpace(string(body))
	if len(e.Message) > 200 {
		e.Message = e.Message[:200] + "..."
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	e.Message = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, e.Message)
	return e
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, time.Until(t).Round(time.Second))
	}
	return 0
}
