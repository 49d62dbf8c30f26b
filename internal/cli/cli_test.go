package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/api/apitest"
	"github.com/pandastack/pandastack/internal/cli"
)

// result is one run of the command line.
type result struct {
	stdout, stderr string
	code           int
}

// run runs cli.Main with the global --base-url/--api-key flags pointing at
// env (key may be "" to pass none).
func run(t *testing.T, env *apitest.Env, key, stdin string, args ...string) result {
	t.Helper()
	full := []string{"--base-url", env.URL}
	if key != "" {
		full = append(full, "--api-key", key)
	}
	return runRaw(t, stdin, append(full, args...)...)
}

func runRaw(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return result{out.String(), errb.String(), code}
}

func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func createSandbox(t *testing.T, env *apitest.Env, args ...string) string {
	t.Helper()
	r := run(t, env, env.Key, "", append([]string{"sandbox", "create"}, args...)...).want(t, 0)
	return strings.TrimSpace(r.stdout)
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		code      int
		stdoutHas string
		stderrHas string
	}{
		{"help", []string{"help"}, 0, "sandbox", ""},
		{"help lists commands", []string{"help"}, 0, "template", ""},
		{"-h", []string{"-h"}, 0, "usage: pandastack", ""},
		{"no command", nil, 2, "", "usage: pandastack"},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"group without subcommand", []string{"sandbox"}, 2, "", "usage: pandastack sandbox COMMAND"},
		{"unknown subcommand", []string{"sandbox", "explode"}, 2, "", `unknown command "sandbox explode"`},
		{"subcommand -h", []string{"sandbox", "create", "-h"}, 0, "usage: pandastack sandbox create [flags]", ""},
		{"help COMMAND", []string{"help", "fs"}, 0, "usage: pandastack fs COMMAND", ""},
		{"help COMMAND SUB", []string{"help", "sandbox", "exec"}, 0, "--timeout", ""},
		{"bad flag", []string{"sandbox", "ls", "--bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{"missing argument", []string{"sandbox", "get"}, 2, "", "want 1 arguments, got 0"},
		{"extra argument", []string{"sandbox", "create", "extra"}, 2, "", "unexpected arguments: extra"},
		{"bad meta", []string{"sandbox", "create", "--meta", "novalue"}, 2, "", "want KEY=VALUE"},
		{"keys create needs team", []string{"keys", "create"}, 2, "", "--team is required"},
		{"version", []string{"version"}, 0, "pandastack 0.1.0-dev", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runRaw(t, "", tt.args...).want(t, tt.code)
			if !strings.Contains(r.stdout, tt.stdoutHas) || !strings.Contains(r.stderr, tt.stderrHas) {
				t.Fatalf("stdout %q\nstderr %q\nwant stdout with %q, stderr with %q", r.stdout, r.stderr, tt.stdoutHas, tt.stderrHas)
			}
		})
	}
}

func TestSandboxCreateAndList(t *testing.T) {
	env := apitest.Start(t)
	id := createSandbox(t, env, "--template", "base", "--ttl", "120", "--meta", "job=7", "--meta", "owner=ci", "--env", "A=1", "--auto-hibernate", "30s",
		"--on-expiry", "hibernate")
	if !strings.HasPrefix(id, "sb_") {
		t.Fatalf("create printed %q", id)
	}
	if sb, err := env.Store.GetSandbox(context.Background(), id); err != nil || sb.Metadata["owner"] != "ci" || sb.Env["A"] != "1" || sb.AutoHibernateSeconds != 30 ||
		sb.OnExpiry != "hibernate" {
		t.Fatalf("stored %+v, %v", sb, err)
	}
	other := createSandbox(t, env)

	r := run(t, env, env.Key, "", "sandbox", "create", "--json").want(t, 0)
	var created struct{ ID, State string }
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.State != "running" {
		t.Fatalf("--json printed %q (%v)", r.stdout, err)
	}

	tests := []struct {
		name   string
		args   []string
		has    []string
		hasNot []string
	}{
		{"table", []string{"sandbox", "ls"}, []string{"ID", "TEMPLATE", "STATE", "ACCEL", "CREATED", "EXPIRES", "METADATA", id, other, "job=7,owner=ci", "tcg"}, nil},
		{"filter", []string{"sandbox", "ls", "--meta", "job=7"}, []string{id}, []string{other}},
		{"json", []string{"sandbox", "ls", "--json", "--meta", "job=7"}, []string{`"id": "` + id + `"`}, []string{other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, env, env.Key, "", tt.args...).want(t, 0)
			for _, h := range tt.has {
				if !strings.Contains(r.stdout, h) {
					t.Errorf("output lacks %q:\n%s", h, r.stdout)
				}
			}
			for _, h := range tt.hasNot {
				if strings.Contains(r.stdout, h) {
					t.Errorf("output has %q:\n%s", h, r.stdout)
				}
			}
		})
	}

	t.Run("kill, get, ls --all", func(t *testing.T) {
		run(t, env, env.Key, "", "sandbox", "kill", other).want(t, 0)
		get := run(t, env, env.Key, "", "sandbox", "get", other).want(t, 0)
		if !strings.Contains(get.stdout, `"state": "killed"`) {
			t.Fatalf("get after kill: %s", get.stdout)
		}
		if ls := run(t, env, env.Key, "", "sandbox", "ls").want(t, 0); strings.Contains(ls.stdout, other) {
			t.Fatal("killed sandbox listed without --all")
		}
		if ls := run(t, env, env.Key, "", "sandbox", "ls", "--all").want(t, 0); !strings.Contains(ls.stdout, other) {
			t.Fatal("killed sandbox not listed with --all")
		}
	})
	t.Run("ttl", func(t *testing.T) {
		r := run(t, env, env.Key, "", "sandbox", "ttl", id, "3600").want(t, 0)
		if !strings.HasSuffix(strings.TrimSpace(r.stdout), "Z") {
			t.Fatalf("ttl printed %q", r.stdout)
		}
		run(t, env, env.Key, "", "sandbox", "ttl", id, "soon").want(t, 2)
	})
}

func TestSandboxExec(t *testing.T) {
	env := apitest.Start(t)
	id := createSandbox(t, env)
	tests := []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stdout string
		stderr string
	}{
		{"shell command", []string{id, "--", "echo hello; err warn"}, "", 0, "hello\n", "warn\n"},
		{"exit code propagates", []string{id, "--", "echo x; exit 3"}, "", 3, "x\n", ""},
		{"binary bytes preserved", []string{id, "--", "hex 00ff0a80"}, "", 0, "\x00\xff\x0a\x80", ""},
		{"several words run without a shell", []string{id, "--", "echo", "a;b"}, "", 0, "a;b\n", ""},
		{"flags after the id", []string{id, "--env", "K=v", "--cwd", "/tmp", "--user", "app", "--", "getenv K; pwd; whoami"}, "", 0, "v\n/tmp\napp\n", ""},
		{"stdin only with --stdin", []string{id, "--", "cat"}, "ignored", 0, "", ""},
		{"--stdin", []string{"--stdin", id, "--", "cat"}, "from \x00 stdin", 0, "from \x00 stdin", ""},
		{"timeout", []string{"--timeout", "0.05", id, "--", "sleep 5"}, "", 137, "", "timed out"},
		{"command not found", []string{id, "--", "nope"}, "", 127, "", "sh: nope: not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, env, env.Key, tt.stdin, append([]string{"sandbox", "exec"}, tt.args...)...).want(t, tt.code)
			if r.stdout != tt.stdout || !strings.Contains(r.stderr, tt.stderr) {
				t.Fatalf("stdout %q stderr %q; want stdout %q, stderr with %q", r.stdout, r.stderr, tt.stdout, tt.stderr)
			}
		})
	}
	t.Run("no command", func(t *testing.T) {
		run(t, env, env.Key, "", "sandbox", "exec", id).want(t, 2)
	})
	t.Run("large output streams", func(t *testing.T) {
		r := run(t, env, env.Key, "", "sandbox", "exec", id, "--", "yes 20000000").want(t, 0)
		if len(r.stdout) != 20000000 {
			t.Fatalf("stdout has %d bytes", len(r.stdout))
		}
	})
	t.Run("ps", func(t *testing.T) {
		r := run(t, env, env.Key, "", "sandbox", "ps", id).want(t, 0)
		if !strings.Contains(r.stdout, "PID") || !strings.Contains(r.stdout, "exited") {
			t.Fatalf("ps:\n%s", r.stdout)
		}
	})
}

func TestFiles(t *testing.T) {
	env := apitest.Start(t)
	id := createSandbox(t, env)
	data := "binary \x00\xff\xfe data\n"

	run(t, env, env.Key, data, "fs", "write", id, "/tmp/a.bin").want(t, 0) // from stdin by default
	if r := run(t, env, env.Key, "", "fs", "read", id, "/tmp/a.bin").want(t, 0); r.stdout != data {
		t.Fatalf("read back %q", r.stdout)
	}

	local := filepath.Join(t.TempDir(), "local.txt")
	if err := os.WriteFile(local, []byte("from a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, env, env.Key, "", "fs", "mkdir", id, "/work/dir").want(t, 0)
	run(t, env, env.Key, "", "fs", "write", "--mode", "0600", id, "/work/dir/f.txt", local).want(t, 0)
	run(t, env, env.Key, "stdin", "fs", "write", id, "/work/g.txt", "-").want(t, 0)
	if r := run(t, env, env.Key, "", "fs", "read", id, "/work/dir/f.txt").want(t, 0); r.stdout != "from a file" {
		t.Fatalf("read back %q", r.stdout)
	}

	ls := run(t, env, env.Key, "", "fs", "ls", id, "/work").want(t, 0)
	for _, want := range []string{"MODE", "dir/", "g.txt", "drwxr-xr-x", "rw-r--r--"} {
		if !strings.Contains(ls.stdout, want) {
			t.Errorf("ls lacks %q:\n%s", want, ls.stdout)
		}
	}
	if r := run(t, env, env.Key, "", "fs", "ls", id, "/work/dir").want(t, 0); !strings.Contains(r.stdout, "-rw-------") {
		t.Errorf("mode not applied:\n%s", r.stdout)
	}

	r := run(t, env, env.Key, "", "fs", "rm", id, "/work").want(t, 1)
	if !strings.Contains(r.stderr, "error: conflict: /work: directory not empty") {
		t.Fatalf("stderr %q", r.stderr)
	}
	run(t, env, env.Key, "", "fs", "rm", id, "/work", "-r").want(t, 0) // flag after the arguments
	r = run(t, env, env.Key, "", "fs", "read", id, "/work/g.txt").want(t, 1)
	if !strings.Contains(r.stderr, "error: not_found: ") || r.stdout != "" {
		t.Fatalf("read removed file: %+v", r)
	}
	run(t, env, env.Key, "", "fs", "write", id, "/tmp/x", "/no/such/local/file").want(t, 1)
	run(t, env, env.Key, "", "fs", "write", "--mode", "rwx", id, "/tmp/x").want(t, 2)
}

func TestErrors(t *testing.T) {
	env := apitest.Start(t)
	id := createSandbox(t, env)
	run(t, env, env.Key, "", "sandbox", "kill", id).want(t, 0)
	tests := []struct {
		name   string
		key    string
		args   []string
		stderr string
	}{
		{"not found", env.Key, []string{"sandbox", "get", "sb_nope"}, "error: not_found: sandbox sb_nope not found\n"},
		{"another team's sandbox", env.OtherKey, []string{"sandbox", "get", id}, "error: not_found: sandbox " + id + " not found\n"},
		{"wrong key", "pds_" + strings.Repeat("x", 40), []string{"sandbox", "ls"}, "error: unauthorized: invalid API key\n"},
		{"no key", "", []string{"sandbox", "ls"}, "error: unauthorized: missing API key\n"},
		{"gone", env.Key, []string{"sandbox", "exec", id, "--", "echo"}, "error: gone: sandbox " + id + " was killed at "},
		{"unknown template", env.Key, []string{"sandbox", "create", "--template", "nope"}, `error: not_found: template "nope" not found`},
		{"admin only", env.Key, []string{"keys", "create", "--team", "x"}, "error: forbidden: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PANDASTACK_API_KEY", "")
			t.Setenv("PANDASTACK_TOKEN", "")
			r := run(t, env, tt.key, "", tt.args...).want(t, 1)
			if !strings.HasPrefix(r.stderr, tt.stderr) || r.stdout != "" {
				t.Fatalf("stdout %q stderr %q, want stderr starting %q", r.stdout, r.stderr, tt.stderr)
			}
		})
	}
	t.Run("server down", func(t *testing.T) {
		r := runRaw(t, "", "--base-url", "http://127.0.0.1:1", "--api-key", env.Key, "sandbox", "ls").want(t, 1)
		if !strings.HasPrefix(r.stderr, "error: ") {
			t.Fatalf("stderr %q", r.stderr)
		}
	})
}

func TestEnvironmentAndFlagOverrides(t *testing.T) {
	env := apitest.Start(t)
	t.Setenv("PANDASTACK_BASE_URL", env.URL)
	t.Setenv("PANDASTACK_API_KEY", env.Key)
	runRaw(t, "", "sandbox", "ls").want(t, 0)

	t.Setenv("PANDASTACK_API_KEY", "pds_"+strings.Repeat("x", 40))
	runRaw(t, "", "sandbox", "ls").want(t, 1)
	runRaw(t, "", "sandbox", "ls", "--api-key", env.Key).want(t, 0) // command flag overrides env
	runRaw(t, "", "--api-key", env.Key, "sandbox", "ls").want(t, 0) // so does the global flag

	t.Setenv("PANDASTACK_BASE_URL", "http://127.0.0.1:1")
	runRaw(t, "", "--api-key", env.Key, "sandbox", "ls", "--base-url", env.URL).want(t, 0)
}

func TestKeysAndTemplates(t *testing.T) {
	env := apitest.Start(t)
	r := run(t, env, env.AdminKey, "", "keys", "create", "--team", "initech", "--name", "ci").want(t, 0)
	key := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(key, "pds_") || !strings.Contains(r.stderr, "team initech") {
		t.Fatalf("keys create: %+v", r)
	}
	run(t, env, key, "", "sandbox", "ls").want(t, 0) // the new key works

	ls := run(t, env, env.Key, "", "template", "ls").want(t, 0)
	if !strings.Contains(ls.stdout, "NAME") || !strings.Contains(ls.stdout, "base") || !strings.Contains(ls.stdout, "512 MiB") {
		t.Fatalf("template ls:\n%s", ls.stdout)
	}
	b := run(t, env, env.AdminKey, "", "template", "build", "python").want(t, 0)
	if b.stdout != "resolving inputs\nbaking snapshot\n"+"built template python (id "+strings.Split(strings.Split(b.stdout, "(id ")[1], ")")[0]+") in 42 ms\n" {
		t.Fatalf("template build:\n%s", b.stdout)
	}
	run(t, env, env.Key, "", "template", "build", "python").want(t, 1)
}

func TestVolumes(t *testing.T) {
	env := apitest.Start(t)
	id := strings.TrimSpace(run(t, env, env.Key, "", "volume", "create", "--size", "64", "data").want(t, 0).stdout)
	if !strings.HasPrefix(id, "vol_") {
		t.Fatalf("volume create printed %q", id)
	}
	run(t, env, env.Key, "", "volume", "create", "data").want(t, 1) // a taken name
	ls := run(t, env, env.Key, "", "volume", "ls").want(t, 0)
	for _, h := range []string{"NAME", "SIZE", "SANDBOX", id, "data", "64 MiB"} {
		if !strings.Contains(ls.stdout, h) {
			t.Errorf("volume ls lacks %q:\n%s", h, ls.stdout)
		}
	}
	createSandbox(t, env, "--volume", "data:/data", "--volume", id+":/mnt/two")
	reqs := env.Engine.Created()
	got := reqs[len(reqs)-1].Volumes
	if len(got) != 2 || got[0].Volume != "data" || got[0].Path != "/data" || got[1].Volume != id || got[1].Path != "/mnt/two" {
		t.Fatalf("create asked for volumes %+v", got)
	}
	run(t, env, env.Key, "", "sandbox", "create", "--volume", "data").want(t, 2)
	run(t, env, env.Key, "", "sandbox", "create", "--volume", "data:/proc/x").want(t, 1)
	if get := run(t, env, env.Key, "", "volume", "get", "data").want(t, 0); !strings.Contains(get.stdout, `"id": "`+id+`"`) {
		t.Fatalf("volume get printed %s", get.stdout)
	}
	run(t, env, env.Key, "", "volume", "delete", "data").want(t, 0)
	run(t, env, env.Key, "", "volume", "get", id).want(t, 1)
}

// The stateful commands reach the API with the right request and print
// what a script needs (ids, the new state).
func TestStateCommands(t *testing.T) {
	env := apitest.Start(t)
	id := createSandbox(t, env)
	kids := strings.Fields(run(t, env, env.Key, "", "sandbox", "fork", id, "--count", "3").want(t, 0).stdout)
	if len(kids) != 3 || kids[0] == id {
		t.Fatalf("sandbox fork --count 3 printed %q", kids)
	}
	run(t, env, env.Key, "", "sandbox", "fork", id, "--count", "11").want(t, 1) // over the limit
	snap := strings.TrimSpace(run(t, env, env.Key, "", "sandbox", "snapshot", id, "--name", "s1").want(t, 0).stdout)
	if !strings.HasPrefix(snap, "snap_") {
		t.Fatalf("sandbox snapshot printed %q", snap)
	}
	if r := run(t, env, env.Key, "", "sandbox", "snapshot", id, "--name", "s1").want(t, 1); !strings.Contains(r.stderr, "conflict") {
		t.Fatalf("a taken snapshot name: %q", r.stderr)
	}
	if ls := run(t, env, env.Key, "", "snapshot", "ls").want(t, 0); !strings.Contains(ls.stdout, snap) || !strings.Contains(ls.stdout, "s1") {
		t.Fatalf("snapshot ls:\n%s", ls.stdout)
	}
	createSandbox(t, env, "--snapshot", snap)
	reqs := env.Engine.Created()
	if last := reqs[len(reqs)-1]; last.Snapshot != snap || last.Template != "" {
		t.Fatalf("create --snapshot asked for snapshot %q template %q", last.Snapshot, last.Template)
	}
	if out := run(t, env, env.Key, "", "sandbox", "hibernate", id).want(t, 0).stdout; strings.TrimSpace(out) != "hibernated" {
		t.Fatalf("sandbox hibernate printed %q", out)
	}
	if out := run(t, env, env.Key, "", "sandbox", "wake", id).want(t, 0).stdout; strings.TrimSpace(out) != "running" {
		t.Fatalf("sandbox wake printed %q", out)
	}
	run(t, env, env.Key, "", "snapshot", "delete", snap).want(t, 0)
	if ls := run(t, env, env.Key, "", "snapshot", "ls").want(t, 0); strings.Contains(ls.stdout, snap) {
		t.Fatalf("snapshot ls after delete:\n%s", ls.stdout)
	}
	run(t, env, env.Key, "", "sandbox", "fork").want(t, 2) // no id
}
