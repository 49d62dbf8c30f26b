package guest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pandastack/pandastack/internal/guestproto"
)

type guestUser struct {
	name     string
	uid, gid uint32
	home     string
	shell    string
	groups   []uint32
}

// lookupUser resolves a user name (or numeric uid) from /etc/passwd. The
// empty name is root.
func lookupUser(name string) (guestUser, error) {
	if name == "" {
		name = "root"
	}
	f, err := os.Open("/etc/passwd")
	if err != nil {
		if name == "root" {
			return guestUser{name: "root", home: "/root", shell: "/bin/sh"}, nil
		}
		return guestUser{}, fmt.Errorf("read /etc/passwd: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 7 || (fs[0] != name && fs[2] != name) {
			continue
		}
		uid, _ := strconv.ParseUint(fs[2], 10, 32)
		gid, _ := strconv.ParseUint(fs[3], 10, 32)
		u := guestUser{name: fs[0], uid: uint32(uid), gid: uint32(gid), home: fs[5], shell: fs[6]}
		u.groups = supplementaryGroups(u.name, u.gid)
		return u, nil
	}
	return guestUser{}, &guestproto.Error{Code: guestproto.ErrInvalid, Message: fmt.Sprintf("user %q does not exist in the sandbox", name)}
}

func supplementaryGroups(name string, primary uint32) []uint32 {
	gs := []uint32{primary}
	f, err := os.Open("/etc/group")
	if err != nil {
		return gs
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), ":")
		if len(fs) < 4 {
			continue
		}
		for _, m := range strings.Split(fs[3], ",") {
			if m == name {
				if g, err := strconv.ParseUint(fs[2], 10, 32); err == nil {
					gs = append(gs, uint32(g))
				}
			}
		}
	}
	return gs
}

func baseEnv(u guestUser) []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + u.home,
		"USER=" + u.name,
		"LOGNAME=" + u.name,
		"SHELL=" + u.shell,
		"LANG=C.UTF-8",
		"TERM=xterm-256color",
	}
}

func setEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}

// lookPath finds a program on the command's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			path = kv[5:]
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &guestproto.Error{Code: guestproto.ErrNotFound, Message: fmt.Sprintf("executable %q not found in PATH", name)}
}
