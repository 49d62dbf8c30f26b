package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/pandastack/pandastack"
)

// wrap says what was being done when err happened, keeping err's code.
func wrap(err error, what string) error { return fmt.Errorf("%s: %w", what, err) }

func invalid(format string, args ...any) error {
	return pandastack.Errorf(pandastack.EInvalid, format, args...)
}

// decodeJSON reads a JSON object of at most maxJSONBody bytes into v,
// refusing unknown fields and trailing data.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxJSONBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return jsonError(err)
		}
		return invalid("invalid JSON body: unexpected data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return pandastack.Errorf(pandastack.ETooLarge, "request body exceeds %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return invalid("request body must be a JSON object")
	}
	return invalid("invalid JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// absPath checks a path inside a sandbox: absolute, clean enough, no NUL.
func absPath(name, p string) (string, error) {
	if p == "" {
		return "", invalid("%s is required", name)
	}
	if !strings.HasPrefix(p, "/") {
		return "", invalid("%s must be an absolute path, got %q", name, p)
	}
	if strings.ContainsRune(p, 0) {
		return "", invalid("%s must not contain NUL bytes", name)
	}
	return path.Clean(p), nil
}

// checkEnv validates environment variables (see pandastack.CheckEnv).
func checkEnv(env map[string]string) error { return pandastack.CheckEnv(env) }
