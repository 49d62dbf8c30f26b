package router

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TokenParam is the query parameter (and cookie) of a signed port URL:
// ?ps_token=EXPIRY.SIG, SIG an HMAC of the sandbox, the port and the expiry
// under the server's proxy secret.
const TokenParam = "ps_token"

// SignPort signs access to one port of a sandbox until exp.
func SignPort(secret []byte, id string, port int, exp time.Time) string {
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "%s|%d|%d", id, port, exp.Unix())
	return strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

// checkToken reports whether tok is a valid, unexpired signature for this
// sandbox port, and when it expires.
func checkToken(secret []byte, tok, id string, port int) (time.Time, bool) {
	if len(secret) == 0 || tok == "" {
		return time.Time{}, false
	}
	exp, _, ok := strings.Cut(tok, ".")
	if !ok {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || time.Now().Unix() > sec {
		return time.Time{}, false
	}
	at := time.Unix(sec, 0)
	return at, hmac.Equal([]byte(tok), []byte(SignPort(secret, id, port, at)))
}
