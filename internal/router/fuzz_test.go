package router

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// FuzzSandboxHost parses arbitrary Host headers as the proxy does: a host
// it takes for a sandbox port names a port in 1-65535 and an id of the
// form sbx_HEX, and formats back to a host that parses the same; a host
// one label under the domain that is not PORT-ID is an invalid_argument
// error; anything else is the API's.
func FuzzSandboxHost(f *testing.F) {
	for _, h := range []string{"8080-sbx_0123456789abcdef.sandbox.test", "8080-SBX_ABC.Sandbox.Test.:443",
		"0-sbx_1.sandbox.test", "65536-sbx_1.sandbox.test", "api.sandbox.test", "a.b.sandbox.test",
		"sandbox.test", "[::1]:80", "8080-sbx_1.sandbox.test.evil.example"} {
		f.Add(h)
	}
	h := NewHTTP(HTTPConfig{Domain: "sandbox.test"})
	id := regexp.MustCompile(`^sbx_[0-9a-f]{1,64}$`)
	f.Fuzz(func(t *testing.T, host string) {
		port, sid, ok, err := h.sandboxTarget(host)
		if !ok {
			if err != nil || h.Owns(host) {
				t.Fatalf("%q: not a sandbox host, yet err=%v owned=%v", host, err, h.Owns(host))
			}
			return
		}
		if !strings.HasSuffix(NormalizeHost(host), ".sandbox.test") {
			t.Fatalf("%q taken for a sandbox host outside the domain", host)
		}
		if err != nil {
			if pandastack.ErrorCode(err) != pandastack.EInvalid {
				t.Fatalf("%q: error %v, want invalid_argument", host, err)
			}
			return
		}
		if port < 1 || port > 65535 || !id.MatchString(sid) {
			t.Fatalf("%q: port %d id %q", host, port, sid)
		}
		p2, id2, ok2, err2 := h.sandboxTarget(fmt.Sprintf("%d-%s.sandbox.test", port, sid))
		if !ok2 || err2 != nil || p2 != port || id2 != sid {
			t.Fatalf("%q: port %d id %q does not round-trip (%d %q %v %v)", host, port, sid, p2, id2, ok2, err2)
		}
	})
}

// FuzzPortToken checks arbitrary ?ps_token= values: a token is accepted
// only when it is exactly the signature of that sandbox, port and expiry.
func FuzzPortToken(f *testing.F) {
	secret := []byte("fuzz-secret")
	exp := time.Now().Add(time.Hour)
	f.Add(SignPort(secret, "sbx_1", 8080, exp), "sbx_1", 8080)
	f.Add(SignPort(secret, "sbx_1", 8080, exp), "sbx_1", 8081)
	f.Add("+"+SignPort(secret, "sbx_1", 8080, exp), "sbx_1", 8080)
	f.Add("99999999999.AAAA", "sbx_2", 1)
	f.Fuzz(func(t *testing.T, tok, id string, port int) {
		at, ok := checkToken(secret, tok, id, port)
		if ok && (tok != SignPort(secret, id, port, at) || at.Before(time.Now().Add(-time.Second))) {
			t.Fatalf("token %q accepted for %s:%d, expiring %v", tok, id, port, at)
		}
		if _, ok := checkToken(nil, tok, id, port); ok {
			t.Fatal("token accepted without a secret")
		}
	})
}

// scriptConn is a client connection that sends fixed bytes, then ends,
// and records what the listener writes back.
type scriptConn struct {
	r   *bytes.Reader
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *scriptConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *scriptConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}
func (c *scriptConn) Close() error                     { return nil }
func (c *scriptConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *scriptConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// downBackend records that it was dialed and refuses.
type downBackend struct{ dialed *bool }

func (b downBackend) Dial(context.Context) (net.Conn, error) {
	*b.dialed = true
	return nil, pandastack.Errorf(pandastack.ERefused, "down")
}

// pgSSLRequest is PostgreSQL's SSLRequest preamble (length 8, code
// 80877103), answered 'S'.
func pgSSLRequest(br *bufio.Reader, c net.Conn) (bool, error) {
	b, err := br.Peek(8)
	if err != nil || binary.BigEndian.Uint32(b[:4]) != 8 || binary.BigEndian.Uint32(b[4:]) != 80877103 {
		return false, nil
	}
	_, _ = br.Discard(8)
	_, err = c.Write([]byte{'S'})
	return true, err
}

// clientHello is the first flight of a TLS client for name.
func clientHello(name string) []byte {
	var rec bytes.Buffer
	c := tls.Client(&scriptConn{r: bytes.NewReader(nil)}, &tls.Config{ServerName: name})
	_ = c.Handshake() // fails reading the answer; the hello is written
	rec.Write(c.NetConn().(*scriptConn).out.Bytes())
	return rec.Bytes()
}

// FuzzTLSListener feeds arbitrary first bytes to the SNI listener's
// routing (a PostgreSQL SSLRequest preamble, then a ClientHello): it
// returns once the client stops sending, answers only 'S' to the
// preamble and TLS alerts otherwise, and dials a route's backend only for
// a ClientHello that names that route's host.
func FuzzTLSListener(f *testing.F) {
	const host = "pg.db.sandbox.test"
	hello := clientHello(host)
	ssl := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 8), 80877103)
	f.Add(hello)
	f.Add(append(append([]byte(nil), ssl...), hello...))
	f.Add(clientHello("other.sandbox.test"))
	f.Add(clientHello("PG.DB.Sandbox.Test."))
	f.Add(hello[:len(hello)/2])
	f.Add([]byte("GET / HTTP/1.1\r\nHost: pg.db.sandbox.test\r\n\r\n"))
	f.Add(ssl)
	f.Fuzz(func(t *testing.T, in []byte) {
		var dialed bool
		table := NewTable()
		if err := table.Register(Route{Host: host, Kind: TCP, TLS: Passthrough, Backend: downBackend{&dialed}}); err != nil {
			t.Fatal(err)
		}
		l := NewTLS(nil, TLSConfig{Table: table, Preambles: []Preamble{pgSSLRequest}})
		c := &scriptConn{r: bytes.NewReader(in)}
		done := make(chan struct{})
		go func() { defer close(done); l.serve(c) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the listener kept reading after the client stopped")
		}
		if dialed && !bytes.Contains(bytes.ToLower(in), []byte(host)) {
			t.Fatalf("backend of %s dialed for a connection that never names it", host)
		}
		out := c.out.Bytes()
		out = bytes.TrimPrefix(out, []byte{'S'})
		if len(out) > 0 && (len(out) != 7 || out[0] != recordTypeAlert) {
			t.Fatalf("listener wrote %q", c.out.Bytes())
		}
	})
}
