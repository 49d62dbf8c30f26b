// Package mcp serves PandaStack sandboxes to an AI agent over the Model
// Context Protocol (MCP): JSON-RPC 2.0 messages, one per line, on a reader
// and a writer (stdin and stdout for `pandastack mcp`).
//
// The server keeps one stateful session: a current sandbox that the tools
// (exec, read_file, write_file, list_files, fork, kill) work on. The first
// tool that needs a sandbox starts one from template "base", unless
// sandbox_create started one. When the input ends or the context is
// canceled, the session's sandboxes are killed and Serve returns.
//
// Requests are answered in order for tools (they share the session, so a
// client may pipeline them), while ping, initialize and tools/list are
// answered at once and notifications/cancelled cancels a pending call. The
// server talks to PandaStack through the Go SDK (sdk/go). It is independent
// of the transport: anything that gives lines in and takes lines out works.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	sdk "github.com/pandastack/pandastack/sdk/go"
)

// ProtocolVersion is the MCP revision this server implements.
const ProtocolVersion = "2025-06-18"

// supportedVersions are the revisions a client may ask for and get: the
// tools part of the protocol is the same in all of them.
var supportedVersions = []string{ProtocolVersion, "2025-03-26", "2024-11-05"}

// queueSize is how many tool calls may wait behind the running one before
// the server stops reading its input.
const queueSize = 256

// Server is an MCP server over one PandaStack session. Use it for one Serve.
type Server struct {
	c      *sdk.Client
	log    *slog.Logger
	apiKey string
}

// New returns a server that uses c to reach PandaStack and logs to log (nil:
// no logs). The key for the calls the SDK cannot make itself (fork) comes
// from PANDASTACK_API_KEY (or PANDASTACK_TOKEN), like NewClient's default;
// SetAPIKey overrides it.
func New(c *sdk.Client, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key := os.Getenv("PANDASTACK_API_KEY")
	if key == "" {
		key = os.Getenv("PANDASTACK_TOKEN")
	}
	return &Server{c: c, log: log, apiKey: key}
}

// SetAPIKey sets the API key the server uses for calls it makes without the
// SDK; it must be the key the client was made with.
func (s *Server) SetAPIKey(key string) { s.apiKey = key }

// call is one tools/call waiting for or being run.
type call struct {
	id     json.RawMessage
	params json.RawMessage
	ctx    context.Context
	cancel context.CancelFunc
}

// Serve reads messages from in and writes answers to out until in ends or
// ctx is canceled; then it kills the session's sandboxes and returns nil.
// It returns an error only if out cannot be written to (the sandboxes are
// still killed).
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := &serveState{
		srv:     s,
		w:       &writer{w: out},
		sess:    newSession(s.c, s.log, s.apiKey),
		pending: map[string]*call{},
	}
	queue := make(chan *call, queueSize)
	var worker sync.WaitGroup
	worker.Go(func() {
		for c := range queue {
			st.runCall(c)
		}
	})

	type line struct {
		b   []byte
		err error
	}
	lines := make(chan line)
	go func() {
		lr := newLineReader(in)
		for {
			b, err := lr.next()
			select {
			case lines <- line{b, err}:
			case <-ctx.Done():
				return
			}
			if err != nil && !errors.Is(err, errTooLarge) {
				return
			}
		}
	}()

	reason := "end of input"
loop:
	for {
		select {
		case <-ctx.Done():
			reason = "canceled"
			break loop
		case l := <-lines:
			switch {
			case errors.Is(l.err, errTooLarge):
				st.reply(nullID, nil, &rpcError{Code: codeParseError, Message: fmt.Sprintf("parse error: message larger than %d bytes", maxMessageBytes)})
				continue
			case errors.Is(l.err, io.EOF):
				break loop
			case l.err != nil:
				reason = "input error: " + l.err.Error()
				break loop
			}
			if c := st.handle(ctx, l.b); c != nil {
				select {
				case queue <- c:
				case <-ctx.Done():
					st.reply(c.id, errorResult("the server is shutting down"), nil)
					c.cancel()
					reason = "canceled"
					break loop
				}
			}
			if err := st.w.failed(); err != nil {
				reason = "output error"
				cancel()
				break loop
			}
		}
	}
	s.log.Info("shutting down", "reason", reason)
	close(queue)
	// Let queued calls finish (a client may close its input right after
	// its last request); cancellation of ctx cuts them short.
	worker.Wait()
	cancel()
	if err := st.sess.close(); err != nil {
		s.log.Error("kill sandboxes", "err", err)
	}
	if err := st.w.failed(); err != nil {
		return fmt.Errorf("mcp: write: %w", err)
	}
	return nil
}

// serveState is the state of one Serve.
type serveState struct {
	srv  *Server
	w    *writer
	sess *session

	mu      sync.Mutex
	pending map[string]*call // by id, until answered
}

func (st *serveState) reply(id json.RawMessage, result any, rerr *rpcError) {
	resp := response{JSONRPC: "2.0", ID: id, Result: result, Error: rerr}
	if rerr == nil && result == nil {
		resp.Result = struct{}{}
	}
	if err := st.w.send(resp); err != nil {
		st.srv.log.Error("write answer", "err", err)
	}
}

// handle processes one line. Tool calls are returned to be queued; all
// else is answered here.
func (st *serveState) handle(ctx context.Context, line []byte) *call {
	log := st.srv.log
	if len(line) == 0 {
		return nil
	}
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			// Valid JSON but not an object (e.g. a batch, which MCP
			// 2025-06-18 does not allow).
			st.reply(nullID, nil, &rpcError{Code: codeInvalidRequest, Message: "invalid request: a message must be a JSON object"})
			return nil
		}
		if json.Valid(line) {
			st.reply(nullID, nil, &rpcError{Code: codeInvalidRequest, Message: "invalid request: " + err.Error()})
			return nil
		}
		log.Warn("malformed message", "err", err)
		st.reply(nullID, nil, &rpcError{Code: codeParseError, Message: "parse error: " + err.Error()})
		return nil
	}
	if m.Method == "" {
		if m.hasID() && (m.Result != nil || m.Error != nil) {
			return nil // a response to a request we never sent: ignore
		}
		if m.hasID() {
			st.reply(idOrNull(m.ID), nil, &rpcError{Code: codeInvalidRequest, Message: "invalid request: no method"})
		}
		return nil
	}
	if m.JSONRPC != "2.0" || m.hasID() && !validID(m.ID) {
		if m.hasID() {
			st.reply(idOrNull(m.ID), nil, &rpcError{Code: codeInvalidRequest, Message: `invalid request: want "jsonrpc": "2.0" and a string or number id`})
		}
		return nil
	}
	if !m.hasID() {
		st.notification(m)
		return nil
	}
	log.Debug("request", "method", m.Method, "id", string(m.ID))
	switch m.Method {
	case "initialize":
		st.reply(m.ID, st.initialize(m.Params), nil)
	case "ping":
		st.reply(m.ID, struct{}{}, nil)
	case "tools/list":
		st.reply(m.ID, map[string]any{"tools": tools}, nil)
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.Name == "" {
			st.reply(m.ID, nil, &rpcError{Code: codeInvalidParams, Message: "invalid params: want {\"name\": TOOL, \"arguments\": {...}}"})
			return nil
		}
		if toolByName(p.Name) == nil {
			st.reply(m.ID, nil, &rpcError{Code: codeInvalidParams, Message: fmt.Sprintf("unknown tool %q", p.Name)})
			return nil
		}
		cctx, cancel := context.WithCancel(ctx)
		c := &call{id: m.ID, params: m.Params, ctx: cctx, cancel: cancel}
		st.mu.Lock()
		st.pending[string(m.ID)] = c
		st.mu.Unlock()
		return c
	default:
		st.reply(m.ID, nil, &rpcError{Code: codeMethodNotFound, Message: fmt.Sprintf("method not found: %s", m.Method)})
	}
	return nil
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if validID(id) {
		return id
	}
	return nullID
}

// notification handles a message without id: it is never answered.
func (st *serveState) notification(m message) {
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			return
		}
		st.mu.Lock()
		c := st.pending[string(p.RequestID)]
		st.mu.Unlock()
		if c != nil {
			st.srv.log.Info("request cancelled by the client", "id", string(p.RequestID), "reason", p.Reason)
			c.cancel()
		}
	default:
		// notifications/initialized and anything else: nothing to do.
		st.srv.log.Debug("notification", "method", m.Method)
	}
}

func (st *serveState) initialize(params json.RawMessage) any {
	var p struct {
		ProtocolVersion string `json:"protocolVersion"`
		ClientInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"clientInfo"`
	}
	json.Unmarshal(params, &p) // all optional
	version := ProtocolVersion
	for _, v := range supportedVersions {
		if v == p.ProtocolVersion {
			version = v
		}
	}
	st.srv.log.Info("initialize", "client", p.ClientInfo.Name, "client_version", p.ClientInfo.Version,
		"asked", p.ProtocolVersion, "protocol", version, "pandastack", st.srv.c.BaseURL())
	return map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]any{"name": "pandastack", "version": pandastack.Version},
		"instructions": "Tools run in one PandaStack microVM sandbox that this server keeps for the session: " +
			"the first tool that needs it starts one from template \"base\" (or call sandbox_create), " +
			"and it is killed when the session ends. Paths are absolute.",
	}
}

// runCall runs a queued tool call and answers it.
func (st *serveState) runCall(c *call) {
	defer func() {
		st.mu.Lock()
		delete(st.pending, string(c.id))
		st.mu.Unlock()
		c.cancel()
	}()
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(c.params, &p) // checked by handle
	t := toolByName(p.Name)
	start := time.Now()
	var r *toolResult
	if err := c.ctx.Err(); err != nil {
		r = errorResult("%s was canceled before it started", p.Name)
	} else {
		r = t.run(c.ctx, st.sess, p.Arguments)
		if c.ctx.Err() != nil && r.IsError {
			r.Content = append(r.Content, content{Type: "text", Text: "(the call was canceled)"})
		}
	}
	st.srv.log.Info("tool call", "tool", p.Name, "id", string(c.id), "is_error", r.IsError, "duration", time.Since(start).Round(time.Millisecond))
	st.reply(c.id, r, nil)
}
