package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// maxReadBytes caps what read_file returns.
const maxReadBytes = 1 << 20

// tool is one MCP tool: its description for tools/list and its handler.
type tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"inputSchema"`

	run func(ctx context.Context, s *session, args json.RawMessage) *toolResult `json:"-"`
}

// content is one item of a tool result: text, or an image (run_code's
// plots) with base64 Data.
type content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

// toolResult is the result of tools/call. Failures of the tool (bad
// arguments, API errors, a command exiting non-zero) are results with
// IsError set, for the model to read; only protocol errors are JSON-RPC
// errors.
type toolResult struct {
	Content []content `json:"content"`
	IsError bool      `json:"isError"`
}

func textResult(format string, args ...any) *toolResult {
	return &toolResult{Content: []content{{Type: "text", Text: fmt.Sprintf(format, args...)}}}
}

func errorResult(format string, args ...any) *toolResult {
	r := textResult(format, args...)
	r.IsError = true
	return r
}

// schema builds an object JSON Schema.
func schema(required []string, props map[string]any) map[string]any {
	if required == nil {
		required = []string{}
	}
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

func prop(typ, desc string) map[string]any { return map[string]any{"type": typ, "description": desc} }

func envProp(desc string) map[string]any {
	return map[string]any{"type": "object", "description": desc, "additionalProperties": map[string]any{"type": "string"}}
}

// tools is every tool, in the order tools/list gives them.
var tools = []*tool{
	{
		Name: "sandbox_create",
		Description: "Start a fresh microVM sandbox (killing the session's current one) and make it the one the other tools use; " +
			"without this call they start one from template \"base\" on first use.",
		InputSchema: schema(nil, map[string]any{
			"template":    prop("string", `template to start from (default "base")`),
			"ttl_seconds": map[string]any{"type": "integer", "minimum": 1, "description": "seconds until the sandbox expires (default 1800)"},
			"env":         envProp("environment variables of every command in the sandbox"),
		}),
		run: toolCreate,
	},
	{
		Name:        "exec",
		Description: "Run a shell command (/bin/sh -c) in the sandbox and return its stdout, stderr, exit code and whether it timed out.",
		InputSchema: schema([]string{"command"}, map[string]any{
			"command":         prop("string", "the command line, run with /bin/sh -c"),
			"timeout_seconds": map[string]any{"type": "number", "exclusiveMinimum": 0, "description": "kill the command after this many seconds (default 60)"},
			"cwd":             prop("string", "absolute working directory"),
			"env":             envProp("extra environment variables for this command"),
		}),
		run: toolExec,
	},
	{
		Name:        "read_file",
		Description: "Read a file in the sandbox (UTF-8 text; other bytes are returned as base64).",
		InputSchema: schema([]string{"path"}, map[string]any{
			"path": prop("string", "absolute path of the file"),
		}),
		run: toolReadFile,
	},
	{
		Name:        "write_file",
		Description: "Create or replace a file in the sandbox (mode 0644) with the given content.",
		InputSchema: schema([]string{"path", "content"}, map[string]any{
			"path":    prop("string", "absolute path of the file; its directory must exist"),
			"content": prop("string", "the file's content: text, or base64 if base64 is true"),
			"base64":  prop("boolean", "content is base64-encoded bytes (default false)"),
		}),
		run: toolWriteFile,
	},
	{
		Name:        "list_files",
		Description: "List a directory in the sandbox: one line per entry with its type, size and name.",
		InputSchema: schema([]string{"path"}, map[string]any{
			"path": prop("string", "absolute path of the directory"),
		}),
		run: toolListFiles,
	},
	{
		Name:        "fork",
		Description: "Fork the sandbox into a copy (files and running state) and return the copy's id; the session keeps using the original unless select is true.",
		InputSchema: schema(nil, map[string]any{
			"select": prop("boolean", "make the copy the sandbox the other tools use (default false)"),
		}),
		run: toolFork,
	},
	{
		Name: "run_code",
		Description: "Run Python in the sandbox's live interpreter (needs a sandbox from template \"code-interpreter\": call sandbox_create first). " +
			"Variables and imports persist between calls. Returns stdout, stderr, the value of the last expression, matplotlib plots (as images) and any exception with its traceback.",
		InputSchema: schema([]string{"code"}, map[string]any{
			"code":            prop("string", "Python code; the value of its last expression is returned"),
			"timeout_seconds": map[string]any{"type": "number", "exclusiveMinimum": 0, "description": "interrupt the run after this many seconds (default 60); the interpreter stays usable"},
		}),
		run: toolRunCode,
	},
	{
		Name:        "kill",
		Description: "Kill the session's sandbox now; the next tool that needs one starts a fresh sandbox.",
		InputSchema: schema(nil, map[string]any{}),
		run:         toolKill,
	},
}

// toolByName finds a tool.
func toolByName(name string) *tool {
	for _, t := range tools {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// decodeArgs decodes a tool's arguments strictly (unknown ones are errors,
// as the schemas say).
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("invalid arguments: %s must be of type %s, got %s", te.Field, jsonType(te.Type.Kind().String()), te.Value)
		}
		return fmt.Errorf("invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "integer"
	case strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "map", kind == "struct":
		return "object"
	case kind == "bool":
		return "boolean"
	}
	return kind
}

// apiErrorText describes an error for the model, with the server's code
// and message for API errors.
func apiErrorText(err error) string {
	var ae *sdk.APIError
	if errors.As(err, &ae) {
		s := fmt.Sprintf("the PandaStack server answered %s: %s", ae.Code, ae.Message)
		if ae.Status != 0 {
			s += fmt.Sprintf(" (HTTP %d)", ae.Status)
		}
		return s
	}
	return err.Error()
}

// sandboxError reports a failed operation on sb. If the server says the
// sandbox has ended, the session forgets it so the next tool starts anew.
func sandboxError(s *session, sb *sdk.Sandbox, what string, err error) *toolResult {
	if sdk.IsGone(err) {
		s.forget(sb)
		return errorResult("%s failed: sandbox %s has ended (%s). The next tool call starts a fresh sandbox from template %q, or call sandbox_create.",
			what, sb.ID, apiErrorText(err), defaultTemplate)
	}
	return errorResult("%s failed in sandbox %s: %s", what, sb.ID, apiErrorText(err))
}

// accelNote explains the sandbox's isolation.
func accelNote(accel string) string {
	switch accel {
	case "kvm":
		return "accel kvm: hardware-virtualized microVM"
	case "tcg":
		return "accel tcg: the VM is EMULATED in software (slow), which is NOT a security boundary"
	}
	return "accel " + accel
}

func describeSandbox(sb *sdk.Sandbox) string {
	s := fmt.Sprintf("sandbox %s (template %s, %s)", sb.ID, sb.Template, accelNote(sb.Accel))
	if !sb.ExpiresAt.IsZero() {
		s += ", expires " + sb.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return s
}

// withSandbox runs fn on the current sandbox, starting one if needed, and
// prefixes the result with a note when it did.
func withSandbox(ctx context.Context, s *session, fn func(sb *sdk.Sandbox) *toolResult) *toolResult {
	sb, started, err := s.sandbox(ctx)
	if err != nil {
		return errorResult("%s", apiErrorText(err))
	}
	r := fn(sb)
	if started && len(r.Content) > 0 {
		r.Content[0].Text = "[started " + describeSandbox(sb) + "]\n" + r.Content[0].Text
	}
	return r
}

func toolCreate(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Template   *string           `json:"template"`
		TTLSeconds *int              `json:"ttl_seconds"`
		Env        map[string]string `json:"env"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	p := sdk.CreateSandboxParams{Template: defaultTemplate, TTLSeconds: defaultTTLSeconds, Env: a.Env}
	if a.Template != nil {
		if *a.Template == "" {
			return errorResult("invalid arguments: template must not be empty")
		}
		p.Template = *a.Template
	}
	if a.TTLSeconds != nil {
		if *a.TTLSeconds <= 0 {
			return errorResult("invalid arguments: ttl_seconds must be positive, got %d", *a.TTLSeconds)
		}
		p.TTLSeconds = *a.TTLSeconds
	}
	sb, previous, killErr, err := s.create(ctx, p)
	var notes []string
	if previous != "" {
		if killErr != nil {
			notes = append(notes, fmt.Sprintf("could not kill the previous sandbox %s: %s", previous, apiErrorText(killErr)))
		} else {
			notes = append(notes, fmt.Sprintf("killed the previous sandbox %s", previous))
		}
	}
	if err != nil {
		return errorResult("%s", strings.Join(append(notes, fmt.Sprintf("could not create a sandbox from template %q: %s", p.Template, apiErrorText(err))), "\n"))
	}
	notes = append([]string{"created " + describeSandbox(sb), "id: " + sb.ID}, notes...)
	return textResult("%s", strings.Join(notes, "\n"))
}

// timeoutArg is a tool's timeout_seconds argument: 60 when absent, an
// error result when not positive.
func timeoutArg(v *float64) (float64, *toolResult) {
	if v == nil {
		return 60, nil
	}
	if *v <= 0 {
		return 0, errorResult("invalid arguments: timeout_seconds must be positive, got %g", *v)
	}
	return *v, nil
}

func toolExec(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Command        string            `json:"command"`
		TimeoutSeconds *float64          `json:"timeout_seconds"`
		Cwd            string            `json:"cwd"`
		Env            map[string]string `json:"env"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	if strings.TrimSpace(a.Command) == "" {
		return errorResult("invalid arguments: command is required")
	}
	timeout, bad := timeoutArg(a.TimeoutSeconds)
	if bad != nil {
		return bad
	}
	return withSandbox(ctx, s, func(sb *sdk.Sandbox) *toolResult {
		stdout, stderr := newCapture(maxStreamBytes), newCapture(maxStreamBytes)
		res, err := sb.Exec(ctx, a.Command, sdk.ExecOptions{
			Env: a.Env, Cwd: a.Cwd, TimeoutSeconds: timeout,
			OnStdout: stdout.write, OnStderr: stderr.write, DiscardOutput: true,
		})
		if err != nil {
			return sandboxError(s, sb, "exec", err)
		}
		return execResult(res, timeout, stdout, stderr)
	})
}

func execResult(res *sdk.ExecResult, timeout float64, stdout, stderr *capture) *toolResult {
	var b strings.Builder
	fmt.Fprintf(&b, "exit_code: %d\n", res.ExitCode)
	if res.Signal != "" {
		fmt.Fprintf(&b, "signal: %s\n", res.Signal)
	}
	fmt.Fprintf(&b, "timed_out: %t", res.TimedOut)
	if res.TimedOut {
		fmt.Fprintf(&b, " (killed after %gs; pass a larger timeout_seconds if it needs longer)", timeout)
	}
	b.WriteString("\n")
	for _, st := range []struct {
		name string
		c    *capture
	}{{"stdout", stdout}, {"stderr", stderr}} {
		text, _ := st.c.text()
		if text == "" {
			fmt.Fprintf(&b, "--- %s: (empty) ---\n", st.name)
			continue
		}
		fmt.Fprintf(&b, "--- %s (%d bytes) ---\n%s", st.name, st.c.total, text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteString("\n")
		}
	}
	r := textResult("%s", b.String())
	r.IsError = res.ExitCode != 0 || res.TimedOut
	return r
}

// limitWriter keeps the first n bytes and fails after them, to stop a
// transfer that is too large.
type limitWriter struct {
	buf bytes.Buffer
	n   int
}

var errReadLimit = errors.New("read limit reached")

func (w *limitWriter) Write(p []byte) (int, error) {
	room := w.n - w.buf.Len()
	if len(p) > room {
		w.buf.Write(p[:room])
		return room, errReadLimit
	}
	return w.buf.Write(p)
}

func toolReadFile(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	if a.Path == "" {
		return errorResult("invalid arguments: path is required")
	}
	return withSandbox(ctx, s, func(sb *sdk.Sandbox) *toolResult {
		w := &limitWriter{n: maxReadBytes}
		_, err := sb.Files().ReadTo(ctx, a.Path, w)
		truncated := errors.Is(err, errReadLimit)
		if err != nil && !truncated {
			return sandboxError(s, sb, "read_file "+a.Path, err)
		}
		data := w.buf.Bytes()
		note := ""
		if truncated {
			data = trimRuneEnd(data)
			note = fmt.Sprintf("[file is larger than %d bytes; only the start is shown: use exec (e.g. head, tail, grep) to see more]\n", maxReadBytes)
		}
		if !utf8.Valid(data) {
			return textResult("%s[%s is not valid UTF-8 text: %d bytes, base64-encoded below]\n%s",
				note, a.Path, len(data), base64.StdEncoding.EncodeToString(data))
		}
		return textResult("%s%s", note, data)
	})
}

func toolWriteFile(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		Base64  bool    `json:"base64"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	if a.Path == "" {
		return errorResult("invalid arguments: path is required")
	}
	if a.Content == nil {
		return errorResult("invalid arguments: content is required (it may be empty)")
	}
	data := []byte(*a.Content)
	if a.Base64 {
		var err error
		if data, err = base64.StdEncoding.DecodeString(strings.TrimSpace(*a.Content)); err != nil {
			return errorResult("invalid arguments: content is not valid base64: %v", err)
		}
	}
	return withSandbox(ctx, s, func(sb *sdk.Sandbox) *toolResult {
		fi, err := sb.Files().WriteFrom(ctx, a.Path, bytes.NewReader(data), 0)
		if err != nil {
			return sandboxError(s, sb, "write_file "+a.Path, err)
		}
		return textResult("wrote %d bytes to %s", fi.Size, a.Path)
	})
}

func toolListFiles(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Path string `json:"path"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	if a.Path == "" {
		return errorResult("invalid arguments: path is required")
	}
	return withSandbox(ctx, s, func(sb *sdk.Sandbox) *toolResult {
		entries, err := sb.Files().List(ctx, a.Path)
		if err != nil {
			return sandboxError(s, sb, "list_files "+a.Path, err)
		}
		return textResult("%s", formatEntries(a.Path, entries))
	})
}

// formatEntries writes one line per entry: "d" (directory), "l" (symbolic
// link) or "-" (file), the size in bytes and the name, with a "/" after
// directory names.
func formatEntries(dir string, entries []sdk.FileInfo) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries\n", dir, len(entries))
	for _, e := range entries {
		kind, name := "-", e.Name
		switch {
		case e.IsDir:
			kind, name = "d", name+"/"
		case e.SymlinkTarget != "":
			kind, name = "l", name+" -> "+e.SymlinkTarget
		}
		fmt.Fprintf(&b, "%s %10d  %s\n", kind, e.Size, name)
	}
	return b.String()
}

func toolFork(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Select bool `json:"select"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	parent, child, err := s.fork(ctx, a.Select)
	if err != nil {
		if parent == nil {
			return errorResult("fork failed: %s", apiErrorText(err))
		}
		var ae *sdk.APIError
		if errors.As(err, &ae) && (ae.Status == 405 || ae.Status == 404 && strings.Contains(ae.Message, "no route")) {
			return errorResult("fork failed: %s. This PandaStack server does not support forking yet; sandbox %s is unchanged and still in use.", apiErrorText(err), parent.ID)
		}
		return sandboxError(s, parent, "fork", err)
	}
	using := parent.ID
	if a.Select {
		using = child.ID
	}
	return textResult("forked sandbox %s into %s\nid: %s\nthe session now uses %s", parent.ID, describeSandbox(child), child.ID, using)
}

func toolKill(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct{}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	id, err := s.kill(ctx)
	if err != nil {
		return errorResult("kill failed for sandbox %s: %s", id, apiErrorText(err))
	}
	if id == "" {
		return textResult("there is no sandbox to kill")
	}
	return textResult("killed sandbox %s; the next tool that needs a sandbox starts a fresh one", id)
}
