package router_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/ca"
	"github.com/pandastack/pandastack/internal/router"
)

// tlsEnv is an SNI listener on loopback with the real CA, HTTP names served
// by an http.Server that says whether it saw TLS.
type tlsEnv struct {
	addr   string
	table  *router.Table
	ca     *ca.CA
	caFile string
	ln     *router.TLSListener
}

func startTLS(t *testing.T, preambles ...router.Preamble) *tlsEnv {
	t.Helper()
	dir := t.TempDir()
	c, err := ca.Open(filepath.Join(dir, "ca"), []string{"sandbox.test"})
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &tlsEnv{addr: tcp.Addr().String(), table: router.NewTable(), ca: c, caFile: c.CertPath()}
	httpLn := router.NewConnListener(tcp.Addr())
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "http host=%s tls=%v", r.Host, r.TLS != nil)
	})}
	go srv.Serve(httpLn)
	e.ln = router.NewTLS(tcp, router.TLSConfig{
		Table: e.table,
		HTTPHost: func(name string) bool {
			return strings.HasSuffix(name, ".sandbox.test") && strings.HasPrefix(name, "8000-")
		},
		ServeHTTP: func(c *tls.Conn) { httpLn.Put(c) },
		Certs:     c,
		Preambles: preambles,
	})
	served := make(chan error, 1)
	go func() { served <- e.ln.Serve() }()
	t.Cleanup(func() {
		srv.Close()
		e.ln.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

func (e *tlsEnv) roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(e.ca.CertPEM())
	return p
}

func (e *tlsEnv) dial(t *testing.T, name string, alpn ...string) (*tls.Conn, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", e.addr,
		&tls.Config{ServerName: name, RootCAs: e.roots(), NextProtos: alpn})
	if err == nil {
		c.SetDeadline(time.Now().Add(30 * time.Second))
	}
	return c, err
}

// echoBackend is a plain TCP server echoing lines upper-cased, prefixed
// with its name.
func echoBackend(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%s:%s", name, strings.ToUpper(line))
				}
			}()
		}
	}()
	return l.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, line string) string {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	return strings.TrimSuffix(got, "\n")
}

func TestTerminateWithTheServersCA(t *testing.T) {
	e := startTLS(t)
	addr := echoBackend(t, "db")
	if err := e.table.Register(router.Route{Host: "db1.db.sandbox.test", Kind: router.TCP, Backend: router.Addr{Network: "tcp", Address: addr}, ALPN: []string{"postgresql"}}); err != nil {
		t.Fatal(err)
	}
	c, err := e.dial(t, "DB1.db.sandbox.test", "postgresql")
	if err != nil {
		t.Fatalf("handshake with the CA as the only root: %v", err)
	}
	defer c.Close()
	if got := c.ConnectionState().NegotiatedProtocol; got != "postgresql" {
		t.Errorf("ALPN %q, want postgresql", got)
	}
	if leaf := c.ConnectionState().PeerCertificates[0]; leaf.DNSNames[0] != "db1.db.sandbox.test" {
		t.Errorf("certificate for %v", leaf.DNSNames)
	}
	if got := roundTrip(t, c, "select 1"); got != "db:SELECT 1" {
		t.Fatalf("through the router: %q", got)
	}
}

func TestPassthroughKeepsTheBackendsTLS(t *testing.T) {
	e := startTLS(t)
	// The backend holds its own certificate, from a CA of its own.
	own, err := ca.Open(filepath.Join(t.TempDir(), "own"), []string{"sandbox.test"})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := own.Certificate("pass.sandbox.test")
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{*cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprintf(c, "backend got %s", line)
			}()
		}
	}()
	if err := e.table.Register(router.Route{Host: "pass.sandbox.test", Kind: router.TCP, TLS: router.Passthrough, Backend: router.Addr{Network: "tcp", Address: l.Addr().String()}}); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(own.CertPEM())
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", e.addr, &tls.Config{ServerName: "pass.sandbox.test", RootCAs: roots})
	if err != nil {
		t.Fatalf("handshake with the backend's own CA: %v", err)
	}
	defer c.Close()
	if got := roundTrip(t, c, "hello"); got != "backend got hello" {
		t.Fatalf("%q", got)
	}
	// The server's CA is not what the client saw.
	if _, err := e.dial(t, "pass.sandbox.test"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("trusting only the server's CA on a passthrough route: %v, want a certificate error", err)
	}
}

func TestUnknownNamesGetAnAlert(t *testing.T) {
	e := startTLS(t)
	before := runtime.NumGoroutine()
	for _, name := range []string{"nobody.sandbox.test", "example.com", ""} {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 20 * time.Second}, "tcp", e.addr, &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			t.Fatalf("%q: handshake succeeded", name)
		}
		if !strings.Contains(err.Error(), "unrecognized name") {
			t.Fatalf("%q: %v, want the unrecognized_name alert", name, err)
		}
	}
	t.Run("openssl s_client", func(t *testing.T) {
		out, _ := exec.Command("openssl", "s_client", "-connect", e.addr, "-servername", "nobody.sandbox.test").CombinedOutput()
		if !strings.Contains(string(out), "unrecognized name") {
			t.Fatalf("openssl output:\n%s", out)
		}
	})
	t.Run("not TLS at all", func(t *testing.T) {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read %d, %v: want the connection closed", n, err)
		}
	})
	// Every refused connection's goroutine is gone.
	deadline := time.Now().Add(20 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines, %d before the refused connections", n, before)
	}
}

func TestHTTPOverTLSWithCurl(t *testing.T) {
	e := startTLS(t)
	_, port, _ := net.SplitHostPort(e.addr)
	host := "8000-" + sbx + ".sandbox.test"
	out, err := exec.Command("curl", "-sS", "--max-time", "30", "--cacert", e.caFile,
		"--resolve", host+":"+port+":127.0.0.1", "https://"+host+":"+port+"/").CombinedOutput()
	if err != nil || string(out) != "http host="+host+":"+port+" tls=true" {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	t.Run("openssl s_client verifies the chain", func(t *testing.T) {
		cmd := exec.Command("openssl", "s_client", "-connect", e.addr, "-servername", host, "-CAfile", e.caFile, "-verify_return_error", "-verify_hostname", host)
		cmd.Stdin = strings.NewReader("")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Verify return code: 0 (ok)") {
			t.Fatalf("openssl: %v\n%s", err, out)
		}
	})
}

// sslRequest is PostgreSQL's: length 8, code 80877103; the server answers
// 'S' and the client starts TLS.
func sslRequest(br *bufio.Reader, c net.Conn) (bool, error) {
	b, err := br.Peek(8)
	if err != nil || binary.BigEndian.Uint32(b[:4]) != 8 || binary.BigEndian.Uint32(b[4:]) != 80877103 {
		return false, nil
	}
	br.Discard(8)
	_, err = c.Write([]byte{'S'})
	return true, err
}

func TestPreambleBeforeTheClientHello(t *testing.T) {
	e := startTLS(t, sslRequest)
	addr := echoBackend(t, "pg")
	if err := e.table.Register(router.Route{Host: "db2.db.sandbox.test", Kind: router.TCP, Backend: router.Addr{Network: "tcp", Address: addr}}); err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	req := make([]byte, 8)
	binary.BigEndian.PutUint32(req, 8)
	binary.BigEndian.PutUint32(req[4:], 80877103)
	raw.Write(req)
	answer := make([]byte, 1)
	if _, err := io.ReadFull(raw, answer); err != nil || answer[0] != 'S' {
		t.Fatalf("SSLRequest answer %q %v", answer, err)
	}
	c := tls.Client(raw, &tls.Config{ServerName: "db2.db.sandbox.test", RootCAs: e.roots()})
	if got := roundTrip(t, c, "startup"); got != "pg:STARTUP" {
		t.Fatalf("%q", got)
	}
	// Direct TLS still works on the same port.
	d, err := e.dial(t, "db2.db.sandbox.test")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := roundTrip(t, d, "direct"); got != "pg:DIRECT" {
		t.Fatalf("%q", got)
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	e := startTLS(t)
	addr := echoBackend(t, "x")
	e.table.Register(router.Route{Host: "x.sandbox.test", Kind: router.TCP, Backend: router.Addr{Network: "tcp", Address: addr}})
	c, err := e.dial(t, "x.sandbox.test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "hi")
	if err := e.ln.Close(); err != nil && !strings.Contains(err.Error(), "closed") {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the connection is still open after Close")
	}
}

func TestMain(m *testing.M) {
	for _, tool := range []string{"openssl", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "router tests need %s (scripts/setup installs it)\n", tool)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
