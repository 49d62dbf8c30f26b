package e2bcompat

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
)

// fileEntry is one written file in POST /files' answer.
type fileEntry struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// serveFiles serves envd's GET /files (download) and POST /files (upload,
// multipart or raw). Either the access token header or a signed URL
// grants access; a wrong header is 401.
func (s *Server) serveFiles(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	q := r.URL.Query()
	user := q.Get("username")
	if user == "" {
		user = "user"
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	if !s.filesAllowed(r, c, op) {
		writeAPIError(w, http.StatusUnauthorized, "the X-Access-Token header or the URL's signature is missing or wrong")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.download(w, r, c, resolvePath(q.Get("path"), user))
	case http.MethodPost:
		s.upload(w, r, c, q.Get("path"), user)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeAPIError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on /files")
	}
}

// filesAllowed checks the access token, or else a signature as E2B's SDK
// makes them: "v1_" + unpadded base64 of SHA-256 over
// "PATH:OP:USERNAME:TOKEN[:EXPIRY]".
func (s *Server) filesAllowed(r *http.Request, c *sandboxCall, op string) bool {
	if t := r.Header.Get("X-Access-Token"); t != "" {
		return s.tokenOK(c.sb.ID, t)
	}
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return false
	}
	exp := q.Get("signature_expiration")
	if exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return false
		}
	}
	want := fileSignature(q.Get("path"), op, q.Get("username"), s.accessToken(c.sb.ID), exp)
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}

// fileSignature signs a file URL as E2B's SDK does (exp "" for none).
func fileSignature(path, op, user, token, exp string) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != "" {
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// filesError writes a guest error as envd's {"code":int,"message"}.
func (s *Server) filesError(w http.ResponseWriter, r *http.Request, err error) {
	code := pandastack.ErrorCode(err)
	status := api.StatusForCode(code)
	if code == pandastack.EGone || code == pandastack.EUnavailable {
		status = http.StatusBadGateway
	}
	if status >= 500 {
		s.log.WarnContext(r.Context(), "e2b files", "method", r.Method, "err", err)
	}
	writeAPIError(w, status, pandastack.ErrorMessage(err))
}

func (s *Server) download(w http.ResponseWriter, r *http.Request, c *sandboxCall, p string) {
	started := false
	err := c.guest.ReadFile(r.Context(), p, w, func(fi pandastack.FileInfo) error {
		started = true
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": fi.Name}))
		w.WriteHeader(http.StatusOK)
		return nil
	})
	if err != nil {
		if !started {
			s.filesError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "e2b: download cut short", "sandbox", c.sb.ID, "err", err)
	}
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, c *sandboxCall, qpath, user string) {
	// Uploads stream (chunked, any size): the server's body deadline
	// does not apply, as for the API's own uploads.
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var out []fileEntry
	write := func(dest string, body io.Reader) error {
		fi, err := writeAs(r.Context(), c.guest, user, resolvePath(dest, user), body)
		if err != nil {
			return err
		}
		out = append(out, fileEntry{Path: fi.Path, Name: path.Base(fi.Path), Type: "file"})
		return nil
	}
	switch ctype {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			writeAPIError(w, http.StatusBadRequest, "read multipart body: "+err.Error())
			return
		}
		seen := map[string]bool{}
		for {
			part, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "read multipart body: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			dest := partPath(part.Header.Get("Content-Disposition"))
			if qpath != "" && len(seen) == 0 {
				dest = qpath
			}
			if dest == "" {
				writeAPIError(w, http.StatusBadRequest, "a file part has no filename and the request no ?path=")
				return
			}
			if seen[dest] {
				writeAPIError(w, http.StatusBadRequest, fmt.Sprintf("path %s is given twice", dest))
				return
			}
			seen[dest] = true
			if err := write(dest, part); err != nil {
				s.filesError(w, r, err)
				return
			}
		}
	case "application/octet-stream", "":
		if qpath == "" {
			writeAPIError(w, http.StatusBadRequest, "?path= is required for a raw upload")
			return
		}
		var body io.Reader = r.Body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				writeAPIError(w, http.StatusBadRequest, "gzip body: "+err.Error())
				return
			}
			defer zr.Close()
			body = zr
		}
		if err := write(qpath, body); err != nil {
			s.filesError(w, r, err)
			return
		}
	default:
		writeAPIError(w, http.StatusBadRequest, "unsupported Content-Type "+ctype+": want multipart/form-data or application/octet-stream")
		return
	}
	if len(out) == 0 {
		writeAPIError(w, http.StatusBadRequest, "no file in the request")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeAs writes a file as user, as envd does: its parents are made, the
// file is the user's, and a path the user may not write fails with the
// guest's own permission error (EForbidden). Root writes through the guest
// agent's file protocol; anyone else through a shell run as that user.
func writeAs(ctx context.Context, g pandastack.Guest, user, p string, body io.Reader) (pandastack.FileInfo, error) {
	if user == "root" {
		return g.WriteFile(ctx, p, 0o644, body)
	}
	return asUser(ctx, g, user, p, `mkdir -p -- "$(dirname -- "$1")" && cat > "$1"`, body)
}

// asUser runs script (its $1 is p) as user, then stats p; a failure is the
// script's own stderr.
func asUser(ctx context.Context, g pandastack.Guest, user, p, script string, stdin io.Reader) (pandastack.FileInfo, error) {
	var stderr bytes.Buffer
	res, err := g.Exec(ctx, pandastack.ExecRequest{Args: []string{"/bin/sh", "-c", script, "sh", p}, User: user}, stdin,
		func(ev pandastack.ExecEvent) error {
			if ev.Type == "stderr" && stderr.Len() < 4096 {
				stderr.Write(ev.Data)
			}
			return nil
		})
	if err != nil {
		return pandastack.FileInfo{}, err
	}
	if res.ExitCode != 0 || res.Signal != "" {
		msg := strings.TrimSpace(stderr.String())
		code := pandastack.EInvalid
		if strings.Contains(msg, "Permission denied") || strings.Contains(msg, "Read-only file system") {
			code = pandastack.EForbidden
		}
		if msg == "" {
			msg = fmt.Sprintf("exit status %d", res.ExitCode)
		}
		return pandastack.FileInfo{}, pandastack.Errorf(code, "%s (as user %s)", msg, user)
	}
	return g.Stat(ctx, p)
}

// partPath is the full filename of a part (the SDK sends the destination
// path there; mime/multipart's FileName keeps only its base).
func partPath(disposition string) string {
	_, params, err := mime.ParseMediaType(disposition)
	if err != nil {
		return ""
	}
	return params["filename"]
}
