package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

// maxMessageBytes bounds one incoming line (a write_file of a large file
// in base64 is the biggest thing a client sends).
const maxMessageBytes = 64 << 20

// message is one incoming JSON-RPC message: a request (method and id), a
// notification (method, no id) or a response (result or error, which this
// server, never sending requests, ignores).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// hasID reports whether the message carries an id (even an invalid one):
// whether it expects an answer.
func (m *message) hasID() bool { return len(m.ID) > 0 }

// validID reports whether the id is a string or a number (JSON-RPC allows
// null, MCP does not).
func validID(id json.RawMessage) bool {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return false
	}
	switch v.(type) {
	case string, float64:
		return true
	}
	return false
}

// rpcError is the error member of a response.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return e.Message }

// response is an outgoing JSON-RPC response. Exactly one of Result and
// Error is set.
type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

var nullID = json.RawMessage("null")

// lineReader reads newline-delimited messages of any size up to
// maxMessageBytes.
type lineReader struct {
	r *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader { return &lineReader{bufio.NewReaderSize(r, 64<<10)} }

var errTooLarge = errors.New("message too large")

// next returns the next line without its line ending. At the end of the
// input it returns io.EOF (after a last line without a newline, if any).
// A line longer than maxMessageBytes is skipped and reported as errTooLarge.
func (lr *lineReader) next() ([]byte, error) {
	var line []byte
	tooLarge := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if !tooLarge {
			if len(line)+len(chunk) > maxMessageBytes {
				tooLarge, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLarge {
			if err != nil && len(chunk) == 0 {
				return nil, err
			}
			return nil, errTooLarge
		}
		if err != nil && len(line) == 0 {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// writer writes whole messages, one per line, from any goroutine.
type writer struct {
	mu  sync.Mutex
	w   io.Writer
	err error // the first write error; later writes are dropped
}

func (w *writer) send(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	_, w.err = w.w.Write(buf.Bytes())
	return w.err
}

func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
