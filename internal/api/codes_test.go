package api_test

import (
	"net/http"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
)

var allCodes = []string{
	pandastack.EInvalid, pandastack.EUnauthorized, pandastack.EForbidden, pandastack.ENotFound,
	pandastack.EConflict, pandastack.EGone, pandastack.ETooLarge, pandastack.EOutputTooLarge,
	pandastack.EQuota, pandastack.ERateLimited, pandastack.ETimeout, pandastack.EUnavailable,
	pandastack.EInternal, pandastack.EInsufficientStorage, "method_not_allowed",
}

func TestStatusForCode(t *testing.T) {
	tests := []struct {
		code   string
		status int
	}{
		{pandastack.EInvalid, http.StatusBadRequest},
		{pandastack.EUnauthorized, http.StatusUnauthorized},
		{pandastack.EForbidden, http.StatusForbidden},
		{pandastack.ENotFound, http.StatusNotFound},
		{"method_not_allowed", http.StatusMethodNotAllowed},
		{pandastack.EConflict, http.StatusConflict},
		{pandastack.EGone, http.StatusGone},
		{pandastack.ETooLarge, http.StatusRequestEntityTooLarge},
		{pandastack.EOutputTooLarge, http.StatusUnprocessableEntity},
		{pandastack.EQuota, http.StatusTooManyRequests},
		{pandastack.ERateLimited, http.StatusTooManyRequests},
		{pandastack.ETimeout, http.StatusGatewayTimeout},
		{pandastack.EUnavailable, http.StatusServiceUnavailable},
		{pandastack.EInternal, http.StatusInternalServerError},
		{pandastack.EInsufficientStorage, http.StatusInsufficientStorage},
		{"some_new_code", http.StatusInternalServerError},
	}
	if len(tests) != len(allCodes)+1 {
		t.Fatalf("table covers %d codes, allCodes has %d", len(tests)-1, len(allCodes))
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			if got := api.StatusForCode(tt.code); got != tt.status {
				t.Fatalf("StatusForCode(%q) = %d, want %d", tt.code, got, tt.status)
			}
		})
	}
}

func TestSignalName(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"SIGTERM", "SIGTERM", true},
		{"TERM", "SIGTERM", true},
		{"term", "SIGTERM", true},
		{"15", "SIGTERM", true},
		{"9", "SIGKILL", true},
		{"SIGINT", "SIGINT", true},
		{" hup ", "SIGHUP", true},
		{"", "", false},
		{"99", "", false},
		{"SIGFOO", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := api.SignalName(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("SignalName(%q) = %q, %v; want %q ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
			if err != nil && pandastack.ErrorCode(err) != pandastack.EInvalid {
				t.Fatalf("error code %s, want invalid_argument", pandastack.ErrorCode(err))
			}
		})
	}
}
