// Package pandastack is the Go client for PandaStack, which runs untrusted
// code in microVM sandboxes.
//
//	c := pandastack.NewClient() // PANDASTACK_API_KEY, PANDASTACK_BASE_URL
//	sb, err := c.CreateSandbox(ctx, pandastack.CreateSandboxParams{Template: "base"})
//	if err != nil { ... }
//	defer sb.Kill(context.Background())
//	res, err := sb.Exec(ctx, "echo hello", pandastack.ExecOptions{})
//	fmt.Printf("%s exit=%d\n", res.Stdout, res.ExitCode)
//
// Commands always run over the streaming endpoint, so output of any size
// works and the OnStdout/OnStderr callbacks fire as output is produced.
// Errors from the server are *APIError values; test them with errors.Is
// against ErrNotFound, ErrGone, ... or the IsNotFound, IsGone, ... helpers.
//
// This package stands alone: it shares no code with the server, only the
// HTTP API described in api/openapi.yaml.
package pandastack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Version is this SDK's version, sent in the User-Agent.
const Version = "0.1.0-dev"

// DefaultBaseURL is used when neither WithBaseURL nor PANDASTACK_BASE_URL
// says otherwise.
const DefaultBaseURL = "http://localhost:8080"

const ndjsonType = "application/x-ndjson"

// Client talks to a PandaStack server. It is safe for concurrent use.
type Client struct {
	baseURL   string
	apiKey    string
	http      *http.Client
	userAgent string
}

// Option configures a Client.
type Option func(*Client)

// WithAPIKey sets the API key (overriding PANDASTACK_API_KEY).
func WithAPIKey(key string) Option { return func(c *Client) { c.apiKey = key } }

// WithBaseURL sets the server address, e.g. "https://pandastack.example.com"
// (overriding PANDASTACK_BASE_URL).
func WithBaseURL(u string) Option { return func(c *Client) { c.baseURL = u } }

// WithHTTPClient sets the HTTP client used for requests. Do not give it a
// Timeout shorter than your longest command: use contexts instead.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// NewClient returns a client configured from the environment
// (PANDASTACK_API_KEY, or PANDASTACK_TOKEN; PANDASTACK_BASE_URL) and then
// from opts.
func NewClient(opts ...Option) *Client {
	c := &Client{
		baseURL:   os.Getenv("PANDASTACK_BASE_URL"),
		apiKey:    os.Getenv("PANDASTACK_API_KEY"),
		http:      http.DefaultClient,
		userAgent: "pandastack-go/" + Version,
	}
	if c.apiKey == "" {
		c.apiKey = os.Getenv("PANDASTACK_TOKEN")
	}
	for _, o := range opts {
		o(c)
	}
	if c.baseURL == "" {
		c.baseURL = DefaultBaseURL
	}
	c.baseURL = strings.TrimRight(c.baseURL, "/")
	if c.http == nil {
		c.http = http.DefaultClient
	}
	return c
}

// BaseURL returns the server address the client uses.
func (c *Client) BaseURL() string { return c.baseURL }

// request describes one API call.
type request struct {
	method string
	path   string     // under the base URL, e.g. /v1/sandboxes
	query  url.Values // may be nil
	body   any        // JSON-encoded; or an io.Reader sent as-is (octet-stream)
	accept string     // default application/json
	// contentType overrides the body's content type.
	contentType string
}

// send performs a request and returns the response if its status is 2xx;
// otherwise it returns the *APIError the body describes.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	u := c.baseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	contentType := ""
	switch b := r.body.(type) {
	case nil:
	case io.Reader:
		body, contentType = b, "application/octet-stream"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("pandastack: encode %s %s request: %w", r.method, r.path, err)
		}
		body, contentType = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("pandastack: %s %s: %w", r.method, r.path, err)
	}
	if r.contentType != "" {
		contentType = r.contentType
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	accept := r.accept
	if accept == "" {
		accept = "application/json"
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("pandastack: %s %s: %w", r.method, r.path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	return resp, nil
}

// do performs a request and decodes a JSON answer into out (if not nil).
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("pandastack: decode %s %s answer: %w", r.method, r.path, err)
	}
	return nil
}

// Health is the server's answer to a health check.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	// Accel is "kvm" (hardware isolation) or "tcg" (software emulation,
	// not a security boundary).
	Accel     string `json:"accel"`
	Isolation string `json:"isolation"`
}

// Health checks that the server is up. It needs no API key.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	if err := c.do(ctx, request{method: "GET", path: "/v1/health"}, &h); err != nil {
		return nil, err
	}
	return &h, nil
}
