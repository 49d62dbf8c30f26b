package apps

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// cloneTimeout bounds a clone.
const cloneTimeout = 3 * time.Minute

// clone fetches ref of url into dir (which must not exist) with the host's
// git: one commit, no tags, hooks off, no prompts (an address that needs
// credentials fails instead of waiting), only the file, git, http(s) and
// ssh protocols (not ext::), and the checkout counted against maxBytes. It
// returns the commit. Cloning on the host keeps the build VM free of
// credentials and lets a repository on this machine (a path or a
// loopback daemon) be built; the clone is data only, nothing of it runs
// on the host.
func clone(ctx context.Context, url, ref, dir string, maxBytes int64, guard *GitGuard, log io.Writer) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, cloneTimeout)
	defer cancel()
	home, err := os.MkdirTemp(filepath.Dir(dir), "home-")
	if err != nil {
		return "", fmt.Errorf("clone: %w", err)
	}
	defer os.RemoveAll(home)
	src, pin := url, []string(nil)
	if filepath.IsAbs(url) {
		// --depth is honoured for file:// only.
		src = "file://" + url
	} else if guard != nil && !isLocal(url) {
		if src, pin, err = guard.check(ctx, url); err != nil {
			return "", fmt.Errorf("clone %s: %w", url, err)
		}
	}
	config := append(pin, "-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never",
		"-c", "protocol.file.allow=always", "-c", "protocol.git.allow=always", "-c", "protocol.http.allow=always",
		"-c", "protocol.https.allow=always", "-c", "protocol.ssh.allow=always")
	steps := [][]string{{"clone", "--quiet", "--depth", "1", "--single-branch", "--no-tags", "--branch", ref, "--", src, dir}}
	if strings.HasPrefix(ref, "refs/") {
		// A ref that is no branch or tag (GitHub's refs/pull/N/head):
		// clone --branch takes neither, a fetch of it does.
		steps = [][]string{{"init", "--quiet", dir},
			{"-C", dir, "fetch", "--quiet", "--depth", "1", "--no-tags", "--", src, ref},
			{"-C", dir, "checkout", "--quiet", "FETCH_HEAD"}}
	}
	for _, step := range steps {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "git", slices.Concat(config, step)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_SSH_COMMAND=ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new", "GIT_ASKPASS=/bin/false", "LC_ALL=C"}
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Run(); err != nil {
			msg := strings.TrimSpace(stderr.String())
			if ctx.Err() != nil {
				msg = fmt.Sprintf("timed out after %s", cloneTimeout)
			}
			what := "branch"
			if strings.HasPrefix(ref, "refs/") {
				what = "ref"
			}
			return "", fmt.Errorf("clone %s (%s %s): %s", url, what, ref, oneLine(msg))
		}
	}
	size, err := dirSize(dir)
	if err != nil {
		return "", fmt.Errorf("measure clone: %w", err)
	}
	if size > maxBytes {
		return "", fmt.Errorf("repository is %d MiB checked out, over the limit of %d MiB", size>>20, maxBytes>>20)
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", fmt.Errorf("read cloned commit: %w", err)
	}
	fmt.Fprintf(log, "cloned %s at %s (%d KiB)\n", ref, strings.TrimSpace(string(out))[:12], size>>10)
	return strings.TrimSpace(string(out)), nil
}

// oneLine keeps git's message short for a deploy's error.
func oneLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "fatal:") {
			return l
		}
	}
	if s == "" {
		return "git failed"
	}
	return lines[0]
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// tarDir writes dir's files, .git left out, as a tar stream (regular files,
// directories and symbolic links; modes kept).
func tarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		} else if !fi.Mode().IsRegular() && !fi.IsDir() {
			return nil
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return errors.Join(fmt.Errorf("pack source: %w", err), tw.Close())
	}
	return tw.Close()
}
