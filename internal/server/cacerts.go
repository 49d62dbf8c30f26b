package server

import (
	"fmt"
	"log/slog"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cacerts"
)

// loadExtraCA reads the --extra-ca-certs files (none: nil).
func loadExtraCA(files []string, log *slog.Logger) ([]byte, error) {
	if len(files) == 0 {
		return nil, nil
	}
	pem, err := cacerts.Load(files)
	if err != nil {
		return nil, fmt.Errorf("--extra-ca-certs: %w", err)
	}
	log.Info("sandboxes trust extra CA certificates", "files", files)
	return pem, nil
}

// sandboxEngine is the engine every sandbox (app builds included) is
// created through: it installs the extra CA certificates.
func (s *Server) sandboxEngine() pandastack.Engine {
	return cacerts.Engine{Engine: s.engine, PEM: s.extraCA}
}
