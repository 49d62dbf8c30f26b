// Package detect reads a checked-out repository and says how to run it as
// an app: its framework (next, vite, cra, node, static or python) and the
// install, build and start commands and port that go with it. It only
// reads files; it never runs anything.
//
// The rules, first match wins:
//
//  1. pandastack.json at the root overrides everything it names:
//     {"framework", "install", "build", "start", "port", "output"}. Fields
//     it leaves out come from the rules below (a framework it names picks
//     that framework's defaults).
//  2. package.json with a "next" dependency (dependencies or
//     devDependencies): next. Build `node --run build`, start `node --run
//     start` when a start script exists, else `npx next start`; port 3000.
//  3. package.json with a "vite" dependency, a "build" script, and either
//     "vite build" in that script or a vite.config.{js,mjs,cjs,ts,mts}:
//     vite. A Vite app is a static site once built: output dist/, served
//     on port 8080. (Its index.html is Vite's entry, not a static site.)
//  4. package.json with a "react-scripts" dependency and
//     "react-scripts build" in the build script: cra, output build/, port
//     8080.
//  5. Python markers — requirements.txt, pyproject.toml, Pipfile,
//     manage.py, app.py, main.py, server.py — with a package.json that
//     matched none of the above: python (that package.json is for
//     assets; its build script, if any, runs as the build). Start
//     `python3 manage.py runserver 0.0.0.0:$PORT` for Django, else
//     `python3 FILE` for the first of app.py, main.py, server.py; port
//     8000.
//  6. Any other package.json: node. Start `node --run start` when a
//     start script exists, else `node MAIN` (the "main" field) or the
//     first of index.js, server.js, app.js, main.js; build `node --run
//     build` when a build script exists; port 3000.
//  7. index.html at the root, or public/index.html: static, served from
//     that directory on port 8080.
//  8. Nothing matched but pandastack.json gives a start command: custom
//     (port 8080 unless it names one). Otherwise detection fails.
//
// Install commands follow the lockfile: package-lock.json or
// npm-shrinkwrap.json → `npm ci`, yarn.lock → `npx --yes yarn install
// --frozen-lockfile`, pnpm-lock.yaml → `npx --yes pnpm install
// --frozen-lockfile`, none → `npm install` (nothing when package.json has
// no dependencies at all). Python installs `pip install -r
// requirements.txt` or `pip install .` (pyproject.toml) with Debian's
// --break-system-packages. Static outputs (vite, cra, static) are served
// by `python3 -m http.server`, which every base image has. Commands read
// the port from $PORT. package.json scripts run through `node --run`, with
// their pre and post scripts as npm runs them (see packageJSON.run).
package detect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
)

// Framework names what a repository is.
type Framework string

// The frameworks Detect knows.
const (
	Next   Framework = "next"
	Vite   Framework = "vite"
	CRA    Framework = "cra"
	Node   Framework = "node"
	Python Framework = "python"
	Static Framework = "static"
	// Custom is a repository no rule matched whose pandastack.json gives
	// the start command itself.
	Custom Framework = "custom"
)

// Frameworks lists every framework, in rule order.
var Frameworks = []Framework{Next, Vite, CRA, Python, Node, Static}

// ConfigFile is the file at a repository's root that overrides detection.
const ConfigFile = "pandastack.json"

// Plan says how to install, build and run an app.
type Plan struct {
	Framework Framework `json:"framework"`
	// Install and Build run in order in the source directory; either may
	// be empty.
	Install string `json:"install,omitempty"`
	Build   string `json:"build,omitempty"`
	// Start runs the app; it listens on Port ($PORT).
	Start string `json:"start"`
	Port  int    `json:"port"`
	// Output is the directory a static app is served from ("" otherwise).
	Output string `json:"output,omitempty"`
	// Reason says which rule matched, for the deploy log.
	Reason string `json:"reason"`
}

// ErrUnknown is returned (wrapped) when no rule matches.
var ErrUnknown = errors.New("no framework detected")

// Config is pandastack.json.
type Config struct {
	Framework Framework `json:"framework"`
	Install   *string   `json:"install"`
	Build     *string   `json:"build"`
	Start     string    `json:"start"`
	Port      int       `json:"port"`
	Output    string    `json:"output"`
}

// Dir detects the repository checked out at dir.
func Dir(dir string) (Plan, error) { return Detect(os.DirFS(dir)) }

// Detect applies the rules (see the package doc) to the repository fsys.
func Detect(fsys fs.FS) (Plan, error) {
	r := repo{fsys: fsys}
	cfg, hasCfg, err := r.config()
	if err != nil {
		return Plan{}, err
	}
	var p Plan
	if hasCfg && cfg.Framework != "" {
		if p, err = r.as(cfg.Framework); err != nil {
			return Plan{}, err
		}
		p.Reason = ConfigFile + " names framework " + string(cfg.Framework)
	} else if p, err = r.detect(); err != nil && !(hasCfg && cfg.Start != "") {
		return Plan{}, err
	}
	if hasCfg {
		if p.Reason == "" {
			p.Reason = ConfigFile
		}
		if cfg.Install != nil {
			p.Install = *cfg.Install
		}
		if cfg.Build != nil {
			p.Build = *cfg.Build
		}
		if cfg.Start != "" {
			p.Start = cfg.Start
		}
		if cfg.Port != 0 {
			p.Port = cfg.Port
		}
		if cfg.Output != "" {
			p.Output = cfg.Output
			if p.Framework == "" || p.Framework == Static || p.Framework == Vite || p.Framework == CRA {
				p.Start = serveStatic(cfg.Output)
				if cfg.Start != "" {
					p.Start = cfg.Start
				}
			}
		}
		if p.Framework == "" {
			p.Framework = Custom
		}
		if p.Port == 0 {
			p.Port = 8080
		}
	}
	if p.Port < 1 || p.Port > 65535 {
		return Plan{}, fmt.Errorf("%s: port %d is outside 1-65535", ConfigFile, p.Port)
	}
	return p, nil
}

// repo reads one repository.
type repo struct {
	fsys fs.FS
	pkg  *packageJSON
}

type packageJSON struct {
	Main            string            `json:"main"`
	Scripts         map[string]string `json:"scripts"`
	Dependencies    map[string]string `json:"dependencies"`
	DevDependencies map[string]string `json:"devDependencies"`
}

func (p *packageJSON) has(dep string) bool {
	if p == nil {
		return false
	}
	_, a := p.Dependencies[dep]
	_, b := p.DevDependencies[dep]
	return a || b
}

func (p *packageJSON) script(name string) string {
	if p == nil {
		return ""
	}
	return p.Scripts[name]
}

func (r *repo) exists(name string) bool {
	fi, err := fs.Stat(r.fsys, name)
	return err == nil && !fi.IsDir()
}

func (r *repo) isDir(name string) bool {
	fi, err := fs.Stat(r.fsys, name)
	return err == nil && fi.IsDir()
}

func (r *repo) config() (Config, bool, error) {
	var c Config
	b, err := fs.ReadFile(r.fsys, ConfigFile)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("read %s: %w", ConfigFile, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, false, fmt.Errorf("%s is not valid JSON: %w", ConfigFile, err)
	}
	if c.Framework != "" && !known(c.Framework) {
		return c, false, fmt.Errorf("%s: unknown framework %q (known: next, vite, cra, node, python, static)", ConfigFile, c.Framework)
	}
	return c, true, nil
}

func known(f Framework) bool {
	for _, k := range Frameworks {
		if k == f {
			return true
		}
	}
	return false
}

func (r *repo) packageJSON() (*packageJSON, error) {
	if r.pkg != nil {
		return r.pkg, nil
	}
	b, err := fs.ReadFile(r.fsys, "package.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read package.json: %w", err)
	}
	var p packageJSON
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("package.json is not valid JSON: %w", err)
	}
	r.pkg = &p
	return r.pkg, nil
}

// detect applies rules 2-7.
func (r *repo) detect() (Plan, error) {
	pkg, err := r.packageJSON()
	if err != nil {
		return Plan{}, err
	}
	switch {
	case pkg.has("next"):
		p := r.next(pkg)
		p.Reason = "package.json depends on next"
		return p, nil
	case r.isVite(pkg):
		p := r.vite(pkg)
		p.Reason = "package.json depends on vite and its build script builds with vite"
		return p, nil
	case pkg.has("react-scripts") && strings.Contains(pkg.script("build"), "react-scripts build"):
		p := r.cra(pkg)
		p.Reason = "package.json depends on react-scripts and builds with it"
		return p, nil
	}
	if m := r.pythonMarker(); m != "" {
		p := r.python(pkg)
		p.Reason = m + " is a Python marker"
		if pkg != nil {
			p.Reason += " (package.json matched no JavaScript framework: it builds assets)"
		}
		return p, nil
	}
	if pkg != nil {
		p := r.node(pkg)
		p.Reason = "package.json without a framework dependency"
		return p, nil
	}
	if root := r.staticRoot(); root != "" {
		p := r.static(root)
		p.Reason = path.Join(root, "index.html") + " is a static site"
		return p, nil
	}
	return Plan{}, fmt.Errorf("%w: no %s, package.json, Python files (requirements.txt, pyproject.toml, app.py, main.py, manage.py) or index.html at the root",
		ErrUnknown, ConfigFile)
}

// as is framework f's plan for this repository (pandastack.json named it).
func (r *repo) as(f Framework) (Plan, error) {
	pkg, err := r.packageJSON()
	if err != nil {
		return Plan{}, err
	}
	switch f {
	case Next:
		return r.next(pkg), nil
	case Vite:
		return r.vite(pkg), nil
	case CRA:
		return r.cra(pkg), nil
	case Python:
		return r.python(pkg), nil
	case Node:
		return r.node(pkg), nil
	}
	root := r.staticRoot()
	if root == "" {
		root = "."
	}
	return r.static(root), nil
}

func (r *repo) isVite(pkg *packageJSON) bool {
	build := pkg.script("build")
	if !pkg.has("vite") || build == "" {
		return false
	}
	if strings.Contains(build, "vite build") {
		return true
	}
	for _, ext := range []string{"js", "mjs", "cjs", "ts", "mts"} {
		if r.exists("vite.config." + ext) {
			return true
		}
	}
	return false
}

// install is the install command for the repository's lockfile.
func (r *repo) install(pkg *packageJSON) string {
	switch {
	case pkg == nil:
		return ""
	case r.exists("package-lock.json") || r.exists("npm-shrinkwrap.json"):
		return "npm ci"
	case r.exists("yarn.lock"):
		return "npx --yes yarn install --frozen-lockfile"
	case r.exists("pnpm-lock.yaml"):
		return "npx --yes pnpm install --frozen-lockfile"
	case len(pkg.Dependencies)+len(pkg.DevDependencies) == 0:
		return ""
	}
	return "npm install"
}

func buildScript(pkg *packageJSON) string {
	if pkg.script("build") != "" {
		return pkg.run("build", "")
	}
	return ""
}

// run is the command that runs package.json's script name as `npm run`
// does, its pre and post scripts included, through Node's own script
// runner (`node --run`, Node 22 and later) instead of npm: npm's CLI
// takes seconds to start under emulation (~7 s in a build machine under
// TCG) and then stays in the app's process tree (~50 MiB), where Node's
// runner is in the binary the templates ship. args go to the script.
// What npm adds and `node --run` does not: the npm_* environment
// variables (npm_package_version and the like).
func (p *packageJSON) run(name, args string) string {
	cmd := "node --run " + name
	if args != "" {
		cmd += " -- " + args
	}
	if p.script("pre"+name) != "" {
		cmd = "node --run pre" + name + " && " + cmd
	}
	if p.script("post"+name) != "" {
		cmd += " && node --run post" + name
	}
	return cmd
}

func (r *repo) next(pkg *packageJSON) Plan {
	start := "npx next start -p $PORT"
	if pkg.script("start") != "" {
		start = pkg.run("start", "-p $PORT")
	}
	build := buildScript(pkg)
	if build == "" {
		build = "npx next build"
	}
	return Plan{Framework: Next, Install: r.install(pkg), Build: build, Start: start, Port: 3000}
}

func (r *repo) vite(pkg *packageJSON) Plan {
	build := buildScript(pkg)
	if build == "" {
		build = "npx vite build"
	}
	return Plan{Framework: Vite, Install: r.install(pkg), Build: build, Start: serveStatic("dist"), Port: 8080, Output: "dist"}
}

func (r *repo) cra(pkg *packageJSON) Plan {
	build := buildScript(pkg)
	if build == "" {
		build = "npx react-scripts build"
	}
	return Plan{Framework: CRA, Install: r.install(pkg), Build: build, Start: serveStatic("build"), Port: 8080, Output: "build"}
}

func (r *repo) node(pkg *packageJSON) Plan {
	p := Plan{Framework: Node, Install: r.install(pkg), Build: buildScript(pkg), Port: 3000}
	switch {
	case pkg.script("start") != "":
		p.Start = pkg.run("start", "")
	case pkg != nil && pkg.Main != "" && r.exists(path.Clean(pkg.Main)):
		p.Start = "node " + shellQuote(path.Clean(pkg.Main))
	default:
		p.Start = "node index.js"
		for _, f := range []string{"index.js", "server.js", "app.js", "main.js"} {
			if r.exists(f) {
				p.Start = "node " + f
				break
			}
		}
	}
	return p
}

// pythonMarker is the first Python marker at the root, or "".
func (r *repo) pythonMarker() string {
	for _, f := range []string{"manage.py", "requirements.txt", "pyproject.toml", "Pipfile", "app.py", "main.py", "server.py"} {
		if r.exists(f) {
			return f
		}
	}
	return ""
}

func (r *repo) python(pkg *packageJSON) Plan {
	p := Plan{Framework: Python, Port: 8000}
	switch {
	case r.exists("requirements.txt"):
		p.Install = "pip install --break-system-packages -r requirements.txt"
	case r.exists("pyproject.toml"):
		p.Install = "pip install --break-system-packages ."
	}
	if pkg != nil && pkg.script("build") != "" {
		p.Build = buildScript(pkg)
		if in := r.install(pkg); in != "" {
			p.Build = in + " && " + p.Build
		}
	}
	switch {
	case r.exists("manage.py"):
		p.Start = "python3 manage.py runserver 0.0.0.0:$PORT"
	default:
		p.Start = "python3 main.py"
		for _, f := range []string{"app.py", "main.py", "server.py"} {
			if r.exists(f) {
				p.Start = "python3 " + f
				break
			}
		}
	}
	return p
}

// staticRoot is "." for a root index.html, "public" for
// public/index.html, or "".
func (r *repo) staticRoot() string {
	switch {
	case r.exists("index.html"):
		return "."
	case r.isDir("public") && r.exists("public/index.html"):
		return "public"
	}
	return ""
}

func (r *repo) static(root string) Plan {
	return Plan{Framework: Static, Start: serveStatic(root), Port: 8080, Output: root}
}

// serveStatic serves dir on $PORT.
func serveStatic(dir string) string {
	return "python3 -m http.server $PORT --bind 0.0.0.0 --directory " + shellQuote(dir)
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
