package apps

import (
	"strings"
	"testing"
)

// Env values never reach a deploy's log; short ones (which would mask
// ordinary words) are left alone.
func TestDeployLogMasksEnvValues(t *testing.T) {
	l := newDeployLog(map[string]string{"TOKEN": "s3cr3t-token", "INNER": "s3cr3t", "SHORT": "ab"})
	l.printf("token=%s inner=%s short=ab", "s3cr3t-token", "s3cr3t")
	got := l.String()
	if strings.Contains(got, "s3cr3t") || !strings.HasSuffix(got, "] token=[redacted] inner=[redacted] short=ab\n") {
		t.Fatalf("log: %q", got)
	}
}

// A deploy log keeps the newest output within MaxLogBytes.
func TestDeployLogIsBounded(t *testing.T) {
	l := newDeployLog(nil)
	line := strings.Repeat("x", 1023) + "\n"
	for range 2 * MaxLogBytes / len(line) {
		l.add(line)
	}
	l.add("the end\n")
	got := l.String()
	if len(got) > MaxLogBytes || !strings.HasSuffix(got, "the end\n") || !strings.HasPrefix(got, "[earlier output dropped]") {
		t.Fatalf("log of %d bytes, ends %q", len(got), got[len(got)-20:])
	}
}

// Create's checks: names are DNS labels, refs are branch names, the
// rest in range; defaults fill in.
func TestCreateParamsCheck(t *testing.T) {
	ok := CreateParams{Name: "web-1", GitURL: "https://example.com/r.git"}
	for _, u := range []string{"git@example.com:me/r.git", "ssh://git@example.com/r.git", "git://127.0.0.1:9418/r.git"} {
		if p := (CreateParams{Name: "web", GitURL: u}); p.check() != nil {
			t.Errorf("%s refused: %v", u, p.check())
		}
	}
	if p := (CreateParams{Name: "web", GitURL: "/srv/repo", AllowLocal: true}); p.check() != nil {
		t.Errorf("an admin's path refused: %v", p.check())
	}
	// No git_url: an app deployed by pushing to its git remote.
	if p := (CreateParams{Name: "web"}); p.check() != nil {
		t.Errorf("an app with no git_url refused: %v", p.check())
	}
	if err := ok.check(); err != nil || ok.Branch != "main" || ok.HealthPath != "/" {
		t.Fatalf("good params: %v %+v", err, ok)
	}
	for _, tc := range []struct {
		name string
		p    CreateParams
	}{
		{"upper case", CreateParams{Name: "Web", GitURL: "x"}},
		{"double hyphen", CreateParams{Name: "pr-1--web", GitURL: "x"}},
		{"dot", CreateParams{Name: "a.b", GitURL: "x"}},
		{"option as url", CreateParams{Name: "web", GitURL: "--upload-pack=touch /tmp/x"}},
		{"option as branch", CreateParams{Name: "web", GitURL: "x", Branch: "-b"}},
		{"branch with ..", CreateParams{Name: "web", GitURL: "x", Branch: "a..b"}},
		{"port", CreateParams{Name: "web", GitURL: "x", Port: 70000}},
		{"health path", CreateParams{Name: "web", GitURL: "x", HealthPath: "health"}},
		{"health timeout", CreateParams{Name: "web", GitURL: "x", HealthTimeoutSeconds: -1}},
		{"env key", CreateParams{Name: "web", GitURL: "x", Env: map[string]string{"A=B": "1"}}},
		{"server path", CreateParams{Name: "web", GitURL: "/srv/repo"}},
		{"file url", CreateParams{Name: "web", GitURL: "file:///srv/repo"}},
		{"relative path", CreateParams{Name: "web", GitURL: "repo"}},
	} {
		if err := tc.p.check(); err == nil {
			t.Errorf("%s: accepted %+v", tc.name, tc.p)
		}
	}
}
