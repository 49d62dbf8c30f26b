package guest

import (
	"os"
	"reflect"
	"testing"
)

func TestShellArgs(t *testing.T) {
	env := []string{"PATH=/usr/bin:/bin"}
	sh := func(c string) []string { return []string{shell(), "-c", c} }
	tests := []struct {
		cmd  string
		want []string
	}{
		{"true", []string{"/usr/bin/true"}},
		{"ls -la /tmp", []string{"/usr/bin/ls", "-la", "/tmp"}},
		{"/usr/bin/env", []string{"/usr/bin/env"}},
		{"echo hi", sh("echo hi")},                     // builtin with its own meaning
		{"cd /tmp", sh("cd /tmp")},                     // builtin only
		{"ls *.go", sh("ls *.go")},                     // glob
		{"ls $HOME", sh("ls $HOME")},                   // expansion
		{"FOO=1 env", sh("FOO=1 env")},                 // assignment
		{"ls > out", sh("ls > out")},                   // redirection
		{"ls 'a b'", sh("ls 'a b'")},                   // quoting
		{"true; false", sh("true; false")},             // list
		{"no-such-program-x", sh("no-such-program-x")}, // the shell reports it
		{"ls ~", sh("ls ~")},                           // tilde
		{"echo {a,b}", sh("echo {a,b}")},               // brace expansion (bash)
	}
	for _, tc := range tests {
		if got := shellArgs(tc.cmd, env); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("shellArgs(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}

func TestShellIsBashWhereTheImageHasIt(t *testing.T) {
	if got := firstExecutable("/nonexistent/bash", "/bin/sh"); got != "/bin/sh" {
		t.Errorf("without bash the shell is %q, want /bin/sh", got)
	}
	if _, err := os.Stat("/bin/bash"); err == nil && shell() != "/bin/bash" {
		t.Errorf("with /bin/bash present the shell is %q", shell())
	}
}
