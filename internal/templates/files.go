package templates

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// stageFiles writes a template's files (guest path → content) under the
// cache, named by their content, adds them to extra (guest path → host
// path) and returns a key of them all.
func (b *Builder) stageFiles(files map[string][]byte, extra map[string]string) (string, error) {
	var parts []string
	for _, guest := range slices.Sorted(maps.Keys(files)) {
		h := hashOf("file", string(files[guest]))
		host := filepath.Join(b.cfg.CacheDir, "files", h)
		if _, err := os.Stat(host); err != nil {
			if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
				return "", fmt.Errorf("stage template file %s: %w", guest, err)
			}
			tmp := host + ".tmp"
			if err := os.WriteFile(tmp, files[guest], 0o755); err != nil {
				return "", fmt.Errorf("stage template file %s: %w", guest, err)
			}
			if err := os.Rename(tmp, host); err != nil {
				return "", fmt.Errorf("stage template file %s: %w", guest, err)
			}
		}
		extra[guest] = host
		parts = append(parts, guest, h)
	}
	return hashOf(parts...), nil
}
