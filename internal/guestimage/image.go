package guestimage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// rootLabel is the file system label of the root image.
const rootLabel = "pandastack-root"

// WriteExt4 makes an ext4 image at out (via out+".tmp", then rename) from
// rootfsDir plus extra files, a map from absolute guest path to host source
// path. rootfsDir is not modified: the image is made from it with
// `mkfs.ext4 -d`, then each extra file is written into the image with
// debugfs (write, then set_inode_field for mode — regular file plus the
// source's permission bits — and uid/gid 0), creating missing parent
// directories (mode 0755, root-owned). A guest path whose parent is a symlink
// in rootfsDir is refused; give the real path.
//
// sizeMiB 0 means the disk usage of rootfsDir and the extra files times 1.3
// plus 1024 MiB of free space, rounded up to a multiple of 64 MiB. The size
// used is returned.
func WriteExt4(ctx context.Context, out, rootfsDir string, extra map[string]string, sizeMiB int) (_ int, err error) {
	if fi, err := os.Stat(rootfsDir); err != nil {
		return 0, fmt.Errorf("write ext4 image: %w", err)
	} else if !fi.IsDir() {
		return 0, fmt.Errorf("write ext4 image: %s is not a directory", rootfsDir)
	}
	if sizeMiB < 0 {
		return 0, fmt.Errorf("write ext4 image: negative size %d MiB", sizeMiB)
	}
	script, extraBytes, err := injectScript(rootfsDir, extra)
	if err != nil {
		return 0, fmt.Errorf("write ext4 image: %w", err)
	}
	if sizeMiB == 0 {
		used, err := diskUsage(rootfsDir)
		if err != nil {
			return 0, fmt.Errorf("measure rootfs: %w", err)
		}
		sizeMiB = defaultImageMiB(used + extraBytes)
	}

	tmp := out + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("remove stale image: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()

	mkfs := command{
		name: "mkfs.ext4",
		args: []string{"-q", "-F", "-L", rootLabel, "-E", "root_owner=0:0", "-d", rootfsDir, tmp, strconv.Itoa(sizeMiB) + "M"},
		env:  hostAptEnv,
	}
	if err := mkfs.run(ctx, nil); err != nil {
		return 0, fmt.Errorf("make ext4 file system: %w", err)
	}

	if len(extra) > 0 {
		// debugfs reports failed commands on stderr but still exits 0, so
		// the result is checked file by file afterwards.
		var log bytes.Buffer
		dbg := command{name: "debugfs", args: []string{"-w", "-f", "-", tmp}, env: hostAptEnv, stdin: strings.NewReader(script)}
		if err := dbg.run(ctx, &log); err != nil {
			return 0, fmt.Errorf("add extra files to image: %w", err)
		}
		for _, dest := range slices.Sorted(maps.Keys(extra)) {
			if err := checkImageFile(ctx, tmp, dest, extra[dest]); err != nil {
				return 0, fmt.Errorf("add %s to image: %w; debugfs said:\n%s", dest, err, log.String())
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return 0, fmt.Errorf("move image into place: %w", err)
	}
	return sizeMiB, nil
}

// defaultImageMiB is the image size for used bytes of content: 1.3 times
// the content plus 1 GiB free, rounded up to 64 MiB.
func defaultImageMiB(used int64) int {
	mib := (used + 1<<20 - 1) >> 20
	size := int(math.Ceil(float64(mib)*1.3)) + 1024
	return (size + 63) / 64 * 64
}

// injectScript returns the debugfs commands that add the extra files to an
// image made from rootfsDir, and the total size of those files.
func injectScript(rootfsDir string, extra map[string]string) (string, int64, error) {
	var b strings.Builder
	var total int64
	created := map[string]bool{}
	for _, dest := range slices.Sorted(maps.Keys(extra)) {
		src := extra[dest]
		if !path.IsAbs(dest) || path.Clean(dest) != dest || dest == "/" {
			return "", 0, fmt.Errorf("extra file: guest path %q is not a clean absolute file path", dest)
		}
		if strings.ContainsAny(dest+src, "\"\n\x00") {
			return "", 0, fmt.Errorf("extra file: quote or newline in %q or %q", dest, src)
		}
		fi, err := os.Stat(src)
		if err != nil {
			return "", 0, fmt.Errorf("extra file %s: %w", dest, err)
		}
		if !fi.Mode().IsRegular() {
			return "", 0, fmt.Errorf("extra file %s: source %s is not a regular file", dest, src)
		}
		total += fi.Size()

		var parents []string
		for d := path.Dir(dest); d != "/"; d = path.Dir(d) {
			parents = append(parents, d)
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if created[d] {
				continue
			}
			hfi, err := os.Lstat(filepath.Join(rootfsDir, d))
			switch {
			case err == nil && hfi.IsDir():
				continue
			case err == nil && hfi.Mode()&fs.ModeSymlink != 0:
				return "", 0, fmt.Errorf("extra file %s: %s is a symlink in the rootfs; use the real path", dest, d)
			case err == nil:
				return "", 0, fmt.Errorf("extra file %s: %s is not a directory in the rootfs", dest, d)
			case !errors.Is(err, fs.ErrNotExist):
				return "", 0, fmt.Errorf("extra file %s: %w", dest, err)
			}
			fmt.Fprintf(&b, "mkdir %s\nsif %s mode 040755\nsif %s uid 0\nsif %s gid 0\n", dq(d), dq(d), dq(d), dq(d))
			created[d] = true
		}
		if hfi, err := os.Lstat(filepath.Join(rootfsDir, dest)); err == nil {
			if hfi.IsDir() {
				return "", 0, fmt.Errorf("extra file %s: a directory in the rootfs", dest)
			}
			fmt.Fprintf(&b, "rm %s\n", dq(dest))
		}
		mode := syscall.S_IFREG | uint32(fi.Mode().Perm())
		if fi.Mode()&fs.ModeSetuid != 0 {
			mode |= syscall.S_ISUID
		}
		if fi.Mode()&fs.ModeSetgid != 0 {
			mode |= syscall.S_ISGID
		}
		if fi.Mode()&fs.ModeSticky != 0 {
			mode |= syscall.S_ISVTX
		}
		fmt.Fprintf(&b, "write %s %s\nsif %s mode 0%o\nsif %s uid 0\nsif %s gid 0\n", dq(src), dq(dest), dq(dest), mode, dq(dest), dq(dest))
	}
	return b.String(), total, nil
}

// debugfsStat matches the fields of `debugfs -R stat` output that
// checkImageFile checks.
var (
	debugfsType  = regexp.MustCompile(`Type:\s+(\S+)\s+Mode:\s+([0-7]+)`)
	debugfsOwner = regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)`)
	debugfsSize  = regexp.MustCompile(`Size:\s+(\d+)`)
)

// checkImageFile checks that dest in the image is a root-owned regular file
// with src's size and permission bits.
func checkImageFile(ctx context.Context, img, dest, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	c := command{name: "debugfs", args: []string{"-R", "stat " + dq(dest), img}, env: hostAptEnv}
	var stderr bytes.Buffer
	out, err := c.output(ctx, &stderr, true)
	if err != nil {
		return err
	}
	t := debugfsType.FindSubmatch(out)
	o := debugfsOwner.FindSubmatch(out)
	s := debugfsSize.FindSubmatch(out)
	if t == nil || o == nil || s == nil {
		return fmt.Errorf("not in image (debugfs stat: %s)", strings.TrimSpace(stderr.String()))
	}
	if string(t[1]) != "regular" {
		return fmt.Errorf("type %s in image, want regular", t[1])
	}
	mode, _ := strconv.ParseUint(string(t[2]), 8, 32)
	want := uint64(fi.Mode().Perm())
	if fi.Mode()&fs.ModeSetuid != 0 {
		want |= syscall.S_ISUID
	}
	if fi.Mode()&fs.ModeSetgid != 0 {
		want |= syscall.S_ISGID
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		want |= syscall.S_ISVTX
	}
	if mode != want {
		return fmt.Errorf("mode %04o in image, want %04o", mode, want)
	}
	if string(o[1]) != "0" || string(o[2]) != "0" {
		return fmt.Errorf("owner %s:%s in image, want 0:0", o[1], o[2])
	}
	if size, _ := strconv.ParseInt(string(s[1]), 10, 64); size != fi.Size() {
		return fmt.Errorf("size %d in image, want %d", size, fi.Size())
	}
	return nil
}

// diskUsage returns the bytes allocated to the files under dir, counting
// hard-linked files once, like du.
func diskUsage(dir string) (int64, error) {
	type inode struct{ dev, ino uint64 }
	seen := map[inode]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			total += fi.Size()
			return nil
		}
		if st.Nlink > 1 && !fi.IsDir() {
			k := inode{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}

// dq double-quotes s for debugfs, whose command parser splits on blanks
// outside double quotes and has no escapes (injectScript rejects paths
// holding a quote or newline).
func dq(s string) string { return `"` + s + `"` }
