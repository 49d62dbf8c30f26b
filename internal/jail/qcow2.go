package jail

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// BackingChain returns the files a qcow2 image reads from below it (its
// backing file, that file's, ...), as absolute paths, read from the images'
// headers: a jailed VMM booting on an overlay needs them bound in. A raw
// image has none. Only plain file names are accepted: a backing "file"
// given as a json: or protocol URL is refused.
func BackingChain(image string) ([]string, error) {
	var chain []string
	cur := image
	for depth := 0; ; depth++ {
		if depth > 64 {
			return nil, fmt.Errorf("backing chain of %s: deeper than 64", image)
		}
		next, err := backingFile(cur)
		if err != nil {
			return nil, err
		}
		if next == "" {
			return chain, nil
		}
		chain = append(chain, next)
		cur = next
	}
}

// backingFile reads one qcow2 header's backing file name ("" for none or a
// file that is not qcow2).
func backingFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("backing chain: %w", err)
	}
	defer f.Close()
	var h [20]byte
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return "", nil // shorter than a qcow2 header: raw
	}
	if string(h[:4]) != "QFI\xfb" {
		return "", nil
	}
	off := binary.BigEndian.Uint64(h[8:16])
	size := binary.BigEndian.Uint32(h[16:20])
	if off == 0 || size == 0 {
		return "", nil
	}
	if size > 1023 {
		return "", fmt.Errorf("backing chain: %s names a backing file of %d bytes", path, size)
	}
	name := make([]byte, size)
	if _, err := f.ReadAt(name, int64(off)); err != nil {
		return "", fmt.Errorf("backing chain: read %s: %w", path, err)
	}
	s := string(name)
	if len(s) > 5 && s[:5] == "json:" {
		return "", fmt.Errorf("backing chain: %s has a json: backing file", path)
	}
	if !filepath.IsAbs(s) {
		s = filepath.Join(filepath.Dir(path), s)
	}
	return filepath.Clean(s), nil
}
