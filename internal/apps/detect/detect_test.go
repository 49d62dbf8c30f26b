package detect_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pandastack/pandastack/internal/apps/detect"
)

// Every fixture repository under testdata is detected as its row says.
func TestFixtures(t *testing.T) {
	static := func(dir string) string {
		return "python3 -m http.server $PORT --bind 0.0.0.0 --directory " + dir
	}
	for _, tc := range []struct {
		repo string
		want detect.Plan
	}{
		{"next-app", detect.Plan{Framework: detect.Next, Install: "npm ci", Build: "node --run build", Start: "node --run start -- -p $PORT", Port: 3000}},
		// next wins over a vite dev dependency.
		{"next-with-vite-dev", detect.Plan{Framework: detect.Next, Install: "npm install", Build: "node --run build", Start: "npx next start -p $PORT", Port: 3000}},
		// A Vite app's root index.html is its entry, not a static site.
		{"vite-stray-index", detect.Plan{Framework: detect.Vite, Install: "npm ci", Build: "node --run build", Start: static("dist"), Port: 8080, Output: "dist"}},
		// vite.config.ts stands in for "vite build" in the script.
		{"vite-config-pnpm", detect.Plan{Framework: detect.Vite, Install: "npx --yes pnpm install --frozen-lockfile", Build: "node --run build", Start: static("dist"), Port: 8080, Output: "dist"}},
		// vite without a build script is a plain node app.
		{"vite-no-build", detect.Plan{Framework: detect.Node, Install: "npm install", Start: "node --run start", Port: 3000}},
		// public/index.html belongs to the CRA app.
		{"cra-app", detect.Plan{Framework: detect.CRA, Install: "npx --yes yarn install --frozen-lockfile", Build: "node --run build", Start: static("build"), Port: 8080, Output: "build"}},
		// package.json beats a stray index.html; no dependencies, no install.
		{"node-plain", detect.Plan{Framework: detect.Node, Start: "node --run start", Port: 3000}},
		{"node-main-yarn", detect.Plan{Framework: detect.Node, Install: "npx --yes yarn install --frozen-lockfile", Start: "node src/app.js", Port: 3000}},
		{"node-no-main", detect.Plan{Framework: detect.Node, Install: "npm install", Start: "node server.js", Port: 3000}},
		// An Express app with a public/ directory of its own is a node app,
		// not a static site; its lockfile makes the install `npm ci`.
		{"node-express", detect.Plan{Framework: detect.Node, Install: "npm ci", Start: "node --run start", Port: 3000}},
		// Scripts run through node --run with their pre and post scripts,
		// as npm runs them.
		{"node-hooks", detect.Plan{Framework: detect.Node, Build: "node --run prebuild && node --run build && node --run postbuild",
			Start: "node --run prestart && node --run start", Port: 3000}},
		// A Python app whose package.json only builds assets.
		{"python-with-assets", detect.Plan{Framework: detect.Python, Install: "pip install --break-system-packages -r requirements.txt",
			Build: "npm install && node --run build", Start: "python3 app.py", Port: 8000}},
		{"python-stdlib", detect.Plan{Framework: detect.Python, Start: "python3 main.py", Port: 8000}},
		// manage.py makes it Django, whatever else is there.
		{"python-django", detect.Plan{Framework: detect.Python, Install: "pip install --break-system-packages -r requirements.txt",
			Start: "python3 manage.py runserver 0.0.0.0:$PORT", Port: 8000}},
		// pyproject.toml beats a landing-page index.html.
		{"python-pyproject", detect.Plan{Framework: detect.Python, Install: "pip install --break-system-packages .", Start: "python3 server.py", Port: 8000}},
		{"static-root", detect.Plan{Framework: detect.Static, Start: static("."), Port: 8080, Output: "."}},
		{"static-public", detect.Plan{Framework: detect.Static, Start: static("public"), Port: 8080, Output: "public"}},
		// pandastack.json overrides what it names and keeps the rest.
		{"override-start", detect.Plan{Framework: detect.Next, Install: "npm install", Build: "node --run build", Start: "./run.sh", Port: 9000}},
		{"override-framework", detect.Plan{Framework: detect.Static, Build: "node gen.js", Start: static("site"), Port: 8080, Output: "site"}},
		{"override-only", detect.Plan{Framework: detect.Custom, Build: "make", Start: "./serve --port $PORT", Port: 8080}},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			got, err := detect.Dir(filepath.Join("testdata", tc.repo))
			if err != nil {
				t.Fatal(err)
			}
			if got.Reason == "" {
				t.Error("no reason given")
			}
			got.Reason = ""
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// A repository nothing matches, or a bad pandastack.json, is an error that
// says why.
func TestUndetectable(t *testing.T) {
	_, err := detect.Dir(filepath.Join("testdata", "empty"))
	if !errors.Is(err, detect.ErrUnknown) {
		t.Errorf("empty repo: %v, want ErrUnknown", err)
	}
	_, err = detect.Dir(filepath.Join("testdata", "bad-config"))
	if err == nil || !strings.Contains(err.Error(), `unknown framework "rails"`) {
		t.Errorf("bad config: %v", err)
	}
}
