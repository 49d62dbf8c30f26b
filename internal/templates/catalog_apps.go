package templates

import (
	_ "embed"
	"fmt"
	"slices"

	"github.com/pandastack/pandastack/internal/guestimage"
	"github.com/pandastack/pandastack/internal/pgbouncer"
)

// basePackages is what every application template starts from: base's
// packages.
var basePackages = []string{
	"python3", "python-is-python3", "python3-pip", "python3-venv", "nodejs", "npm", "git", "curl", "ca-certificates",
	"build-essential", "procps", "iproute2", "less", "nano", "unzip", "xz-utils",
}

func withBase(extra ...string) []string { return append(slices.Clone(basePackages), extra...) }

// KernelPort is the guest loopback port the code kernel of the
// code-interpreter template listens on.
const KernelPort = 49999

// KernelPath is where the code kernel lives in the guest.
const KernelPath = "/usr/local/lib/pandastack/kernel.py"

//go:embed kernel/kernel.py
var kernelPy []byte

// Versions of what the catalog installs from npm, pinned so a build key
// names exactly what is in the image.
const (
	claudeCodeVersion     = "2.1.330"
	codexVersion          = "0.169.0"
	opencodeVersion       = "1.18.33"
	playwrightCoreVersion = "1.65.1"
)

// waitPort is a shell snippet that waits (up to 100 s: a bake has two
// minutes in all) until something accepts connections on a guest loopback
// port.
func waitPort(port int) string {
	return fmt.Sprintf(`python3 -c 'import socket, sys, time
for _ in range(1000):
    try:
        socket.create_connection(("127.0.0.1", %d), 1).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit("port %d never opened")'`, port, port)
}

var codeInterpreter = Def{
	Name: "code-interpreter",
	Rootfs: guestimage.RootfsSpec{Suite: "trixie", Mirror: DebianMirror, Packages: []string{
		"python3", "python-is-python3", "python3-pip", "python3-venv", "python3-numpy", "python3-pandas", "python3-matplotlib",
		"python3-scipy", "nodejs", "npm", "git", "curl", "ca-certificates", "procps", "iproute2",
	}},
	CPUs: 1, MemoryMiB: 1024,
	Files: map[string][]byte{KernelPath: kernelPy},
	// The kernel starts with numpy, pandas and pyplot imported, so the
	// first run_code pays for none of them.
	Warm: "node -e 0 && " +
		fmt.Sprintf("cd /work && (PANDASTACK_KERNEL_PRELOAD=numpy,pandas,matplotlib.pyplot setsid python3 %s %d </dev/null >/var/log/pandastack-kernel.log 2>&1 &) && ", KernelPath, KernelPort) +
		waitPort(KernelPort),
}

func init() {
	// agent: the coding-agent CLIs. opencode's installer picks its binary
	// by the CPU it runs on (the build VM's); guests may lack AVX2, so the
	// baseline build is installed whatever that CPU has (under TCG the
	// installer already links it there).
	Catalog["agent"] = Def{
		Name:   "agent",
		Rootfs: guestimage.RootfsSpec{Suite: "trixie", Mirror: DebianMirror, Packages: withBase("ripgrep")},
		// In a build VM: npm install scripts are code from the registry.
		Steps: []string{
			"npm install -g --no-audit --no-fund @anthropic-ai/claude-code@" + claudeCodeVersion +
				" @openai/codex@" + codexVersion + " opencode-ai@" + opencodeVersion,
			"d=/usr/local/lib/node_modules/opencode-ai; b=$(find /usr/local/lib/node_modules -path '*/opencode-linux-x64-baseline/bin/opencode' -type f | head -n1); " +
				"test -n \"$b\" && { [ \"$b\" -ef $d/bin/opencode.exe ] || cp \"$b\" $d/bin/opencode.exe; }",
		},
		CPUs: 1, MemoryMiB: 1024,
		// Only a presence check: under TCG the first run of these large
		// binaries takes longer than a bake allows.
		Warm: "command -v claude codex opencode",
	}
	// browser: Chromium from Debian driven by playwright-core, which
	// node's require finds from any directory.
	Catalog["browser"] = Def{
		Name:   "browser",
		Rootfs: guestimage.RootfsSpec{Suite: "trixie", Mirror: DebianMirror, Packages: withBase("chromium", "fonts-liberation")},
		// In a build VM: npm install scripts are code from the registry.
		Steps: []string{
			"npm install -g --no-audit --no-fund playwright-core@" + playwrightCoreVersion,
			// Node looks for global modules in PREFIX/lib/node (the
			// official build at /usr/local/bin/node: /usr/local/lib/node;
			// Debian's own node: /usr/share/nodejs).
			"mkdir -p /usr/local/lib/node && ln -sfn /usr/local/lib/node_modules/playwright-core /usr/local/lib/node/playwright-core",
			"ln -sfn /usr/local/lib/node_modules/playwright-core /usr/share/nodejs/playwright-core",
		},
		CPUs: 1, MemoryMiB: 2048,
		Warm: "test -x /usr/bin/chromium && node -e \"require('playwright-core')\"",
	}
	// postgres: PostgreSQL 17 with pgvector and more extensions (see
	// PostgresExtensions), running in the bake, trusting local connections
	// (the sandbox is the security boundary). A managed database
	// (internal/databases) turns trust off for its own machine and keeps
	// its WAL's room on its volume with chattr (e2fsprogs, no longer
	// essential in trixie) and setquota (quota).
	Catalog["postgres"] = Def{
		Name: "postgres",
		Rootfs: guestimage.RootfsSpec{Suite: "trixie", Mirror: DebianMirror,
			Packages: withBase(append([]string{"postgresql-17", "postgresql-client-17", "e2fsprogs", "quota"}, postgresExtensionPackages...)...),
			Run: []string{
				"test -d /etc/postgresql/17/main || pg_createcluster 17 main",
				"printf 'local all all trust\\nhost all all 127.0.0.1/32 trust\\nhost all all ::1/128 trust\\n' > /etc/postgresql/17/main/pg_hba.conf",
				postgresExtensionConf,
			}},
		Files: map[string][]byte{pgbouncer.Config: []byte(pgbouncer.Ini)},
		CPUs:  1, MemoryMiB: 512,
		Warm: "install -d -o postgres -g postgres -m 2775 /run/postgresql && pg_ctlcluster 17 main start && " +
			"psql -U postgres -h 127.0.0.1 -Atc 'select 1'",
	}
}
