package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api/apitest"
)

type fileInfo struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Size  int64  `json:"size"`
	Mode  uint32 `json:"mode"`
	IsDir bool   `json:"is_dir"`
}

func TestFileRoundTrip(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	files := "/v1/sandboxes/" + sb.ID + "/files"
	data := make([]byte, 3<<20+17) // binary, bigger than the 1 MiB JSON limit
	rand.Read(data)

	// Upload from a reader of unknown length: sent chunked, streamed.
	r := call(t, env, req{method: "PUT", path: files + "?path=/tmp/blob.bin&mode=0600", key: env.Key, body: io.MultiReader(bytes.NewReader(data))})
	wantStatus(t, r, http.StatusOK)
	fi := decode[fileInfo](t, r)
	if fi.Size != int64(len(data)) || fi.Mode != 0o600 || fi.Path != "/tmp/blob.bin" || fi.Name != "blob.bin" {
		t.Fatalf("written %+v", fi)
	}

	r = call(t, env, req{method: "GET", path: files + "?path=/tmp/blob.bin", key: env.Key})
	wantStatus(t, r, http.StatusOK)
	if !bytes.Equal(r.Body, data) {
		t.Fatalf("read back %d bytes, different from the %d written", len(r.Body), len(data))
	}
	for h, want := range map[string]string{
		"Content-Type":           "application/octet-stream",
		"Content-Length":         "3145745",
		"X-Pandastack-File-Mode": "0600",
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
}

func TestFileErrors(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	base := "/v1/sandboxes/" + sb.ID + "/files"
	call(t, env, req{method: "PUT", path: base + "?path=/tmp/d/x", key: env.Key, body: []byte("x")}) // fails: no /tmp/d
	wantStatus(t, call(t, env, req{method: "POST", path: base + "/mkdir", key: env.Key, body: map[string]any{"path": "/tmp/d"}}), 204)
	wantStatus(t, call(t, env, req{method: "PUT", path: base + "?path=/tmp/d/x", key: env.Key, body: []byte("x")}), 200)

	tests := []struct {
		name    string
		r       req
		status  int
		code    string
		message string
	}{
		{"read missing", req{method: "GET", path: base + "?path=/tmp/nope"}, 404, "not_found", "/tmp/nope: no such file or directory"},
		{"read a directory", req{method: "GET", path: base + "?path=/tmp"}, 400, "invalid_argument", "/tmp is a directory"},
		{"relative path", req{method: "GET", path: base + "?path=tmp/x"}, 400, "invalid_argument", "path must be an absolute path"},
		{"no path", req{method: "GET", path: base}, 400, "invalid_argument", "path is required"},
		{"write into missing dir", req{method: "PUT", path: base + "?path=/nope/x", body: []byte("x")}, 404, "not_found", "/nope"},
		{"bad mode", req{method: "PUT", path: base + "?path=/tmp/y&mode=rwx", body: []byte("x")}, 400, "invalid_argument", "mode must be octal"},
		{"mode too big", req{method: "PUT", path: base + "?path=/tmp/y&mode=17777", body: []byte("x")}, 400, "invalid_argument", "mode must be octal"},
		{"list missing", req{method: "GET", path: base + "/list?path=/nope"}, 404, "not_found", "/nope"},
		{"stat missing", req{method: "GET", path: base + "/stat?path=/nope"}, 404, "not_found", "/nope"},
		{"mkdir relative", req{method: "POST", path: base + "/mkdir", body: map[string]any{"path": "x"}}, 400, "invalid_argument", "absolute"},
		{"remove non-empty", req{method: "DELETE", path: base + "?path=/tmp/d"}, 409, "conflict", "not empty"},
		{"remove bad flag", req{method: "DELETE", path: base + "?path=/tmp/d&recursive=yes"}, 400, "invalid_argument", "recursive must be true or false"},
		{"remove root", req{method: "DELETE", path: base + "?path=/&recursive=true"}, 400, "invalid_argument", "refusing to remove /"},
		{"rename missing", req{method: "POST", path: base + "/rename", body: map[string]any{"from": "/tmp/nope", "to": "/tmp/z"}}, 404, "not_found", "/tmp/nope"},
		{"rename relative", req{method: "POST", path: base + "/rename", body: map[string]any{"from": "/tmp/d", "to": "z"}}, 400, "invalid_argument", "to must be an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.r.key = env.Key
			wantError(t, call(t, env, tt.r), tt.status, tt.code, tt.message)
		})
	}
}

func TestFileOperations(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	base := "/v1/sandboxes/" + sb.ID + "/files"
	do := func(r req, status int) response {
		t.Helper()
		r.key = env.Key
		resp := call(t, env, r)
		wantStatus(t, resp, status)
		return resp
	}
	do(req{method: "POST", path: base + "/mkdir", body: map[string]any{"path": "/work/src"}}, 204)
	do(req{method: "POST", path: base + "/mkdir", body: map[string]any{"path": "/work/src"}}, 204) // already there: fine
	do(req{method: "PUT", path: base + "?path=/work/src/a.go", body: []byte("package a\n")}, 200)
	do(req{method: "PUT", path: base + "?path=/work/b.txt", body: []byte("b")}, 200)

	list := decode[struct{ Entries []fileInfo }](t, do(req{method: "GET", path: base + "/list?path=/work"}, 200))
	if len(list.Entries) != 2 || list.Entries[0].Name != "b.txt" || list.Entries[1].Name != "src" || !list.Entries[1].IsDir {
		t.Fatalf("list %+v", list)
	}
	st := decode[fileInfo](t, do(req{method: "GET", path: base + "/stat?path=/work/src/a.go"}, 200))
	if st.Size != 10 || st.Mode != 0o644 || st.IsDir {
		t.Fatalf("stat %+v", st)
	}
	do(req{method: "POST", path: base + "/rename", body: map[string]any{"from": "/work/src", "to": "/work/lib"}}, 204)
	do(req{method: "GET", path: base + "/stat?path=/work/lib/a.go"}, 200)
	do(req{method: "DELETE", path: base + "?path=/work/b.txt"}, 204)
	do(req{method: "DELETE", path: base + "?path=/work&recursive=true"}, 204)
	wantError(t, call(t, env, req{method: "GET", path: base + "/stat?path=/work/lib/a.go", key: env.Key}), 404, "not_found", "no such file")
	empty := do(req{method: "GET", path: base + "/list?path=/home/user"}, 200)
	if string(bytes.TrimSpace(empty.Body)) != `{"entries":[]}` {
		t.Fatalf("empty dir lists as %s", empty.Body)
	}
}

// TestFileDownloadFailureMidway: once bytes have gone out the status cannot
// change, so the server cuts the connection and the client sees a body
// shorter than Content-Length instead of a silently truncated file.
func TestFileDownloadFailureMidway(t *testing.T) {
	env := apitest.Start(t)
	sb := newSandbox(t, env, env.Key, nil)
	env.Engine.GuestOf(sb.ID).ReadHook = func(_ context.Context, p string, w io.Writer, start func(pandastack.FileInfo) error) error {
		if err := start(pandastack.FileInfo{Name: "f", Path: p, Size: 100, Mode: 0o644}); err != nil {
			return err
		}
		w.Write([]byte("only ten b"))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return errors.New("guest connection lost")
	}
	resp := send(t, context.Background(), env, req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/files?path=/tmp/f", key: env.Key})
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != 100 {
		t.Fatalf("status %d length %d", resp.StatusCode, resp.ContentLength)
	}
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(body) != "only ten b" {
		t.Fatalf("body %q err %v; want the 10 bytes and unexpected EOF", body, err)
	}
}
