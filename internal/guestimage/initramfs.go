package guestimage

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteInitramfs writes a gzip-compressed newc cpio archive to out
// containing:
//
//	/init             the file at agentPath, mode 0755 (the guest agent is init)
//	/modules/<name>.ko  each module path given, mode 0644
//	/modules/order    one module file name per line ("virtio.ko"), in load order
//	/dev /proc /sys /newroot /modules  directories, mode 0755
//	/dev/console      character device 5,1, mode 0600
//
// modules must be in load order and have distinct file names. The archive
// is written to out+".tmp" and renamed to out; the same inputs always give
// the same bytes (every mtime is 0).
func WriteInitramfs(out, agentPath string, modules []string) (err error) {
	seen := map[string]bool{}
	var order strings.Builder
	for _, m := range modules {
		base := filepath.Base(m)
		if !strings.HasSuffix(base, ".ko") {
			return fmt.Errorf("write initramfs: module %s is not an uncompressed .ko file", m)
		}
		if seen[base] {
			return fmt.Errorf("write initramfs: two modules named %s", base)
		}
		seen[base] = true
		order.WriteString(base + "\n")
	}

	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create initramfs: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := gzip.NewWriter(bw) // zero header: no name, no mtime
	cw := newCpioWriter(zw)

	for _, d := range []string{"dev", "proc", "sys", "newroot", "modules"} {
		if err := cw.Dir(d, 0o755); err != nil {
			return fmt.Errorf("write initramfs: %w", err)
		}
	}
	if err := cw.CharDev("dev/console", 0o600, 5, 1); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	if err := addFile(cw, "init", agentPath, 0o755); err != nil {
		return fmt.Errorf("write initramfs: add agent: %w", err)
	}
	for _, m := range modules {
		if err := addFile(cw, "modules/"+filepath.Base(m), m, 0o644); err != nil {
			return fmt.Errorf("write initramfs: add module: %w", err)
		}
	}
	if err := cw.File("modules/order", 0o644, int64(order.Len()), strings.NewReader(order.String())); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("write initramfs: compress: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write initramfs: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write initramfs: sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write initramfs: close: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("write initramfs: rename into place: %w", err)
	}
	return nil
}

// addFile adds the regular file at src to the archive as name.
func addFile(cw *cpioWriter, name, src string, perm uint32) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New(src + " is not a regular file")
	}
	return cw.File(name, perm, fi.Size(), f)
}
