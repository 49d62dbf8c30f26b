package functions

import (
	"io"
	"net/http"
	"testing"
)

func TestHTTPResultMapping(t *testing.T) {
	for _, tc := range []struct {
		name, result string
		status       int
		ctype, body  string
		header       [2]string
	}{
		{"plain value is JSON", `{"a": 1}`, 200, "application/json", `{"a": 1}`, [2]string{}},
		{"a list too", `[1, 2]`, 200, "application/json", `[1, 2]`, [2]string{}},
		{"python response", `{"status_code": 201, "headers": {"X-A": "b"}, "body": "made"}`, 201, "text/plain; charset=utf-8", "made", [2]string{"X-A", "b"}},
		{"node response, JSON body", `{"statusCode": 404, "body": {"missing": true}}`, 404, "application/json", `{"missing": true}`, [2]string{}},
		{"own content type", `{"statusCode": 200, "headers": {"Content-Type": "text/html"}, "body": "<p>hi</p>"}`, 200, "text/html", "<p>hi</p>", [2]string{}},
		{"base64 body", `{"statusCode": 200, "body": "aGk=", "isBase64Encoded": true}`, 200, "text/plain; charset=utf-8", "hi", [2]string{}},
		{"no body", `{"status_code": 204}`, 204, "", "", [2]string{}},
		{"bad status", `{"status_code": 7}`, 502, "", "", [2]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := httpResult(http.Header{}, []byte(tc.result))
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ctype || string(b) != tc.body {
				t.Fatalf("got %d %q %q, want %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status, tc.ctype, tc.body)
			}
			if tc.header[0] != "" && resp.Header.Get(tc.header[0]) != tc.header[1] {
				t.Fatalf("header %s = %q", tc.header[0], resp.Header.Get(tc.header[0]))
			}
		})
	}
}
