package api

import (
	"net/http/httptest"
	"testing"
)

// A handler reached without authentication must not act as "no team",
// which the store reads as every team (security finding 19): it fails.
func TestCallerWithoutPrincipalFailsClosed(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("caller() returned a principal for an unauthenticated request")
		}
	}()
	caller(httptest.NewRequest("GET", "/v1/sandboxes", nil))
}
