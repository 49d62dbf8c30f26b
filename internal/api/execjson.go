package api

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"unicode/utf8"
)

// writeExecResponse writes a buffered exec's answer — execResponse's JSON,
// with stdout and stderr taken from the raw buffers — straight to w through
// a small buffer: the output is escaped (or base64-encoded) on its way out,
// never copied into a string or a marshalled document, so a request holds
// its raw output and nothing proportional to it besides.
func writeExecResponse(w http.ResponseWriter, out execResponse, stdout, stderr []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"pid":` + strconv.Itoa(out.PID) + `,"stdout":`)
	stdoutEnc := writeOutput(bw, stdout)
	bw.WriteString(`,"stderr":`)
	stderrEnc := writeOutput(bw, stderr)
	rest, _ := json.Marshal(struct {
		StdoutEncoding string  `json:"stdout_encoding"`
		StderrEncoding string  `json:"stderr_encoding"`
		ExitCode       int     `json:"exit_code"`
		Signal         string  `json:"signal"`
		TimedOut       bool    `json:"timed_out"`
		DurationMs     float64 `json:"duration_ms"`
	}{stdoutEnc, stderrEnc, out.ExitCode, out.Signal, out.TimedOut, out.DurationMs})
	bw.WriteByte(',')
	bw.Write(rest[1:]) // the object's members and its closing brace
	bw.WriteByte('\n')
	bw.Flush()
}

// writeOutput writes b as a JSON string: the text when it is valid UTF-8,
// else its base64. It returns the encoding: "utf-8" or "base64".
func writeOutput(bw *bufio.Writer, b []byte) string {
	bw.WriteByte('"')
	defer bw.WriteByte('"')
	if !utf8.Valid(b) {
		enc := base64.NewEncoder(base64.StdEncoding, bw)
		enc.Write(b)
		enc.Close()
		return "base64"
	}
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		bw.Write(b[start:i])
		switch c {
		case '"', '\\':
			bw.WriteByte('\\')
			bw.WriteByte(c)
		case '\n':
			bw.WriteString(`\n`)
		case '\r':
			bw.WriteString(`\r`)
		case '\t':
			bw.WriteString(`\t`)
		default:
			bw.WriteString(`\u00`)
			bw.WriteByte(hex[c>>4])
			bw.WriteByte(hex[c&0xf])
		}
		start = i + 1
	}
	bw.Write(b[start:])
	return "utf-8"
}

// budget is a count of bytes shared by requests, never above max.
type budget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes; false (nothing reserved) when that would pass max.
func (b *budget) take(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}

// give returns n reserved bytes.
func (b *budget) give(n int64) { b.used.Add(-n) }
