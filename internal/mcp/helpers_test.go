package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// rpcClient speaks to an MCP server like an agent would: it writes one
// JSON message per line and reads the answers.
type rpcClient struct {
	t       testing.TB
	w       io.WriteCloser
	lines   chan string
	nextID  int
	timeout time.Duration
}

func newRPCClient(t testing.TB, w io.WriteCloser, r io.Reader, timeout time.Duration) *rpcClient {
	c := &rpcClient{t: t, w: w, lines: make(chan string, 100), timeout: timeout}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

// rpcResponse is an answer as the client sees it.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *rpcClient) sendRaw(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatalf("write %q: %v", line, err)
	}
}

func (c *rpcClient) send(v any) {
	c.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(string(b))
}

// recv returns the next answer, failing the test after the timeout.
func (c *rpcClient) recv() rpcResponse {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("server closed its output")
		}
		var r rpcResponse
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			c.t.Fatalf("answer %q is not JSON: %v", line, err)
		}
		if r.JSONRPC != "2.0" {
			c.t.Fatalf("answer %q: jsonrpc is not 2.0", line)
		}
		if (r.Error == nil) == (r.Result == nil) {
			c.t.Fatalf("answer %q: want exactly one of result and error", line)
		}
		return r
	case <-time.After(c.timeout):
		c.t.Fatalf("no answer within %v", c.timeout)
	}
	return rpcResponse{}
}

// request sends a request with a fresh id and returns its answer.
func (c *rpcClient) request(method string, params any) rpcResponse {
	c.t.Helper()
	c.nextID++
	id := c.nextID
	msg := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	c.send(msg)
	r := c.recv()
	if string(r.ID) != fmt.Sprint(id) {
		c.t.Fatalf("%s: answer has id %s, want %d", method, r.ID, id)
	}
	return r
}

// result requests and decodes a successful result into out.
func (c *rpcClient) result(method string, params, out any) {
	c.t.Helper()
	r := c.request(method, params)
	if r.Error != nil {
		c.t.Fatalf("%s: error %d %s", method, r.Error.Code, r.Error.Message)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			c.t.Fatalf("%s: result %s: %v", method, r.Result, err)
		}
	}
}

// toolResult is a tools/call result.
type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError *bool `json:"isError"`
}

func (r toolResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// callTool calls a tool and returns its text and isError.
func (c *rpcClient) callTool(name string, args any) (string, bool) {
	c.t.Helper()
	var r toolResult
	c.result("tools/call", map[string]any{"name": name, "arguments": args}, &r)
	if r.IsError == nil {
		c.t.Fatalf("%s: result has no isError", name)
	}
	for _, ct := range r.Content {
		if ct.Type != "text" {
			c.t.Fatalf("%s: content of type %q", name, ct.Type)
		}
	}
	return r.text(), *r.IsError
}

// mustTool calls a tool that must succeed.
func (c *rpcClient) mustTool(name string, args any) string {
	c.t.Helper()
	text, isErr := c.callTool(name, args)
	if isErr {
		c.t.Fatalf("%s(%v): isError: %s", name, args, text)
	}
	return text
}

// initialize performs the MCP handshake and returns the result.
func (c *rpcClient) initialize(version string) map[string]any {
	c.t.Helper()
	var res map[string]any
	c.result("initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "test", "version": "1"},
	}, &res)
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return res
}

// wantTools is every tool with its required arguments and properties.
var wantTools = map[string]struct{ required, props []string }{
	"sandbox_create": {nil, []string{"template", "ttl_seconds", "env"}},
	"exec":           {[]string{"command"}, []string{"command", "timeout_seconds", "cwd", "env"}},
	"read_file":      {[]string{"path"}, []string{"path"}},
	"write_file":     {[]string{"path", "content"}, []string{"path", "content", "base64"}},
	"list_files":     {[]string{"path"}, []string{"path"}},
	"fork":           {nil, []string{"select"}},
	"kill":           {nil, nil},
	"run_code":       {[]string{"code"}, []string{"code", "timeout_seconds"}},
}

// checkToolList checks tools/list against wantTools.
func checkToolList(t *testing.T, c *rpcClient) {
	t.Helper()
	var res struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			InputSchema struct {
				Type                 string                     `json:"type"`
				Properties           map[string]json.RawMessage `json:"properties"`
				Required             []string                   `json:"required"`
				AdditionalProperties *bool                      `json:"additionalProperties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	c.result("tools/list", map[string]any{}, &res)
	if len(res.Tools) != len(wantTools) {
		t.Errorf("got %d tools, want %d", len(res.Tools), len(wantTools))
	}
	for _, tl := range res.Tools {
		want, ok := wantTools[tl.Name]
		if !ok {
			t.Errorf("unexpected tool %q", tl.Name)
			continue
		}
		s := tl.InputSchema
		if tl.Description == "" || strings.Contains(tl.Description, "\n") {
			t.Errorf("%s: description %q is not one line", tl.Name, tl.Description)
		}
		if s.Type != "object" || s.AdditionalProperties == nil || *s.AdditionalProperties || s.Properties == nil {
			t.Errorf("%s: schema %+v: want type object, properties, additionalProperties false", tl.Name, s)
		}
		if fmt.Sprint(s.Required) != fmt.Sprint(want.required) && !(len(s.Required) == 0 && len(want.required) == 0) {
			t.Errorf("%s: required %v, want %v", tl.Name, s.Required, want.required)
		}
		if len(s.Properties) != len(want.props) {
			t.Errorf("%s: %d properties, want %v", tl.Name, len(s.Properties), want.props)
		}
		for _, p := range want.props {
			var ps struct {
				Type        string `json:"type"`
				Description string `json:"description"`
			}
			if err := json.Unmarshal(s.Properties[p], &ps); err != nil || ps.Type == "" || ps.Description == "" {
				t.Errorf("%s: property %s: %s (want type and description)", tl.Name, p, s.Properties[p])
			}
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("%s: required %s is not a property", tl.Name, r)
			}
		}
	}
}
