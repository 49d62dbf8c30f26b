package e2bcompat

import (
	"reflect"
	"testing"

	"github.com/pandastack/pandastack"
)

// The test vectors were checked against the signed URLs E2B's SDK makes.
func TestFileSignature(t *testing.T) {
	for _, tt := range []struct{ path, op, user, token, exp, want string }{
		{"/tmp/a", "read", "", "tok123", "", "v1_5NAxnqMF0BzGzKMf2x6ZAcOtzGuZk8j8STF9TQpOVXk"},
		{"/tmp/a", "write", "user", "tok123", "1700000000", "v1_+udlkAaE5WsWiBe4q/8uDaQ3dD3BVcGqLuV0OfQVNk4"},
	} {
		if got := fileSignature(tt.path, tt.op, tt.user, tt.token, tt.exp); got != tt.want {
			t.Errorf("fileSignature(%q, %q, %q, %q, %q) = %s, want %s", tt.path, tt.op, tt.user, tt.token, tt.exp, got, tt.want)
		}
	}
}

// The SDK escapes the metadata filter twice: {user:"a b&c"} arrives as
// metadata=user%3Da%252520b%252526c, i.e. this value after the query decode.
func TestParseMetadataFilter(t *testing.T) {
	got, err := parseMetadataFilter("user=a%2520b%2526c&k=v")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"user": "a b&c", "k": "v"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := parseMetadataFilter("novalue"); pandastack.ErrorCode(err) != pandastack.EInvalid {
		t.Fatalf("a pair without = gave %v, want invalid_argument", err)
	}
}

func TestIDs(t *testing.T) {
	s := New(Config{Secret: []byte("k"), Domain: "sbx.example.com:8443"})
	if n, ok := s.nativeID("0123abcd"); !ok || n != "sbx_0123abcd" || s.e2bID(n) != "0123abcd" {
		t.Fatalf("nativeID/e2bID round trip: %q %v", n, ok)
	}
	for _, bad := range []string{"", "sbx_1", "ABC", "a-b", "a.b"} {
		if _, ok := s.nativeID(bad); ok {
			t.Errorf("nativeID(%q) accepted", bad)
		}
	}
	if s.accessToken("sbx_1") == s.accessToken("sbx_2") || !s.tokenOK("sbx_1", s.accessToken("sbx_1")) || s.tokenOK("sbx_1", "") {
		t.Fatal("access tokens are not per sandbox")
	}
	if other := New(Config{Secret: []byte("other")}); other.tokenOK("sbx_1", s.accessToken("sbx_1")) {
		t.Fatal("a token made under another secret is accepted")
	}
	for host, want := range map[string]int{"49983-abc.sbx.example.com": 49983, "3000-abc.sbx.example.com:8443": 3000,
		"api.sbx.example.com": 0, "49983-sbx_abc.sbx.example.com": 0, "x.49983-abc.sbx.example.com": 0} {
		port, id, ok := s.hostTarget(host)
		if (want != 0) != ok || port != want || (ok && id != "abc") {
			t.Errorf("hostTarget(%q) = %d %q %v, want port %d", host, port, id, ok, want)
		}
	}
}

func TestResolvePath(t *testing.T) {
	for _, tt := range []struct{ in, user, want string }{
		{"", "user", "/home/user"}, {"~", "root", "/root"}, {"~/a/b", "user", "/home/user/a/b"},
		{"rel/x", "user", "/home/user/rel/x"}, {"/tmp/../etc", "user", "/etc"},
	} {
		if got := resolvePath(tt.in, tt.user); got != tt.want {
			t.Errorf("resolvePath(%q, %q) = %q, want %q", tt.in, tt.user, got, tt.want)
		}
	}
}

// A signal-killed or timed-out process ends with exit code -1 and an
// error, as envd reports Go's ProcessState; a clean exit has no error.
func TestEndOf(t *testing.T) {
	for _, tt := range []struct {
		res  pandastack.ExecResult
		want endEvent
	}{
		{pandastack.ExecResult{}, endEvent{ExitCode: 0, Exited: true, Status: "exit status 0"}},
		{pandastack.ExecResult{ExitCode: 3}, endEvent{ExitCode: 3, Exited: true, Status: "exit status 3", Error: "exit status 3"}},
		{pandastack.ExecResult{ExitCode: 137, Signal: "SIGKILL"}, endEvent{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}},
		{pandastack.ExecResult{TimedOut: true}, endEvent{ExitCode: -1, Status: "signal: killed", Error: "signal: killed"}},
	} {
		if got := *endOf(tt.res); got != tt.want {
			t.Errorf("endOf(%+v) = %+v, want %+v", tt.res, got, tt.want)
		}
	}
}

// Our file events map onto envd's: a rename is RENAME of the old name and
// CREATE of the new, as envd reports one.
func TestWatchEvents(t *testing.T) {
	var got []string
	for _, ev := range []pandastack.FileEvent{
		{Type: "create", Path: "d/new"}, {Type: "write", Path: "grown"}, {Type: "remove", Path: "gone"},
		{Type: "chmod", Path: "m"}, {Type: "rename", From: "a", Path: "b"}, {Type: "overflow"},
	} {
		for _, fe := range envdEvents(ev) {
			got = append(got, fe.Type+" "+fe.Name)
		}
	}
	want := []string{"EVENT_TYPE_CREATE d/new", "EVENT_TYPE_WRITE grown", "EVENT_TYPE_REMOVE gone",
		"EVENT_TYPE_CHMOD m", "EVENT_TYPE_RENAME a", "EVENT_TYPE_CREATE b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
}
