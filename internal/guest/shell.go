package guest

import (
	"os"
	"strings"
	"sync"
)

// shell is the shell commands run in: bash where the image has it, as E2B
// and a terminal do (brace expansion, [[ ]], printf escapes behave as people
// expect when they paste a command), else /bin/sh. Not a login shell: the
// environment is the one the request and the image set.
var shell = sync.OnceValue(func() string { return firstExecutable("/bin/bash", "/bin/sh") })

func firstExecutable(paths ...string) string {
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return paths[len(paths)-1]
}

// shellArgs turns a command line into an argv. A simple command — words of
// plain characters, no quoting, expansion, redirection or assignment, whose
// program is on PATH and is not a shell builtin with its own meaning — runs
// directly, saving a shell process (a fork and exec under emulation costs
// ~10 ms); anything else runs with the shell's -c, as the user wrote it.
func shellArgs(cmd string, env []string) []string {
	sh := shell()
	words := strings.Fields(cmd)
	if len(words) == 0 || shellOnly[words[0]] {
		return []string{sh, "-c", cmd}
	}
	for _, w := range words {
		for _, r := range w {
			if !plain(r) {
				return []string{sh, "-c", cmd}
			}
		}
	}
	if strings.Contains(words[0], "/") {
		return words
	}
	p, err := lookPath(words[0], env)
	if err != nil {
		return []string{sh, "-c", cmd}
	}
	return append([]string{p}, words[1:]...)
}

func plain(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
		strings.ContainsRune("_./:,+@%-", r)
}

// shellOnly are builtins whose meaning differs from a program of the same
// name (or that have none).
var shellOnly = map[string]bool{
	"cd": true, "pwd": true, "echo": true, "printf": true, "kill": true, "test": true, "type": true,
	"command": true, "ulimit": true, "umask": true, "wait": true, "read": true, "getopts": true,
	"hash": true, "times": true, "trap": true, "alias": true, "unalias": true, "exit": true,
	"export": true, "set": true, "unset": true, "shift": true, "source": true, "eval": true,
	"exec": true, "readonly": true, "local": true, "return": true, "break": true, "continue": true,
	"fg": true, "bg": true, "jobs": true, "time": true,
}
