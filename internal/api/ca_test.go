package api_test

import (
	"net/http"
	"testing"

	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

func TestCACertificateIsPublic(t *testing.T) {
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	env := apitest.Start(t, func(c *api.Config) { c.CACert = pem })
	r := call(t, env, req{method: "GET", path: "/v1/ca.pem"})
	wantStatus(t, r, http.StatusOK)
	if string(r.Body) != string(pem) || r.Header.Get("Content-Type") != "application/x-pem-file" {
		t.Fatalf("%q %q", r.Body, r.Header.Get("Content-Type"))
	}
	none := apitest.Start(t)
	wantError(t, call(t, none, req{method: "GET", path: "/v1/ca.pem"}), http.StatusNotFound, "not_found", "no certificate authority")
}
