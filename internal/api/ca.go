package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
)

// caCert serves the certificate of the server's CA, which signs the
// certificates of the TLS listener: clients add it to their trust store.
func (s *Server) caCert(w http.ResponseWriter, r *http.Request) error {
	if len(s.cfg.CACert) == 0 {
		return pandastack.Errorf(pandastack.ENotFound, "this server has no certificate authority")
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Header().Set("Content-Disposition", `attachment; filename="pandastack-ca.pem"`)
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(s.cfg.CACert)
	return err
}
