package api

import (
	"encoding/json"
	"net/http"
	"sync"
)

// NDJSONType is the media type of streamed responses: one JSON object per
// line, each flushed as soon as it is produced.
const NDJSONType = "application/x-ndjson"

// ndjsonWriter writes a stream of JSON lines. The status line and headers go
// out with the first line, so an operation that fails before producing
// anything can still answer with an ordinary JSON error and status.
type ndjsonWriter struct {
	w       http.ResponseWriter
	mu      sync.Mutex
	started bool
}

func newNDJSON(w http.ResponseWriter) *ndjsonWriter { return &ndjsonWriter{w: w} }

// Started reports whether the response has begun.
func (n *ndjsonWriter) Started() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.started
}

// Send writes one line and flushes it. An error means the client is gone.
func (n *ndjsonWriter) Send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return wrap(err, "encode stream event")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.started {
		h := n.w.Header()
		h.Set("Content-Type", NDJSONType)
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		noWriteDeadline(n.w)
		n.w.WriteHeader(http.StatusOK)
		n.started = true
	}
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return flush(n.w)
}
