package server

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// writeAdminKey writes the bootstrap admin key to DATA/admin-key, readable
// by the owner only, and logs the file's path: the key itself never goes to
// the log (journald, CI output keep logs; security finding 21).
func writeAdminKey(dataDir, key string, log *slog.Logger) error {
	kp := filepath.Join(dataDir, "admin-key")
	f, err := os.OpenFile(kp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write admin key: %w", err)
	}
	// A file left by an older install may have looser permissions.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write admin key: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write admin key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write admin key: %w", err)
	}
	log.Info("admin API key created; it is in the file (mode 0600), not in this log", "file", kp)
	return nil
}
