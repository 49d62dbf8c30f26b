package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// A user reaches a port inside a real sandbox over TLS through the SNI
// listener, trusting only the server's own CA, with curl and with Go.
func TestSandboxPortOverTLS(t *testing.T) {
	ctx := context.Background()
	k, err := main.client(main.admin).CreateKey(ctx, "tls", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	key := k.Key
	c := main.client(key)
	caPEM, err := main.client("").CACertificate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	t.Run("the CLI writes the same certificate", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(binDir, "pandastack"), "ca", "-o", caFile)
		cmd.Env = append(os.Environ(), "PANDASTACK_BASE_URL="+main.url)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pandastack ca: %v\n%s", err, out)
		}
		b, _ := os.ReadFile(caFile)
		if string(b) != string(caPEM) || !strings.HasPrefix(string(b), "-----BEGIN CERTIFICATE-----") {
			t.Fatalf("CLI wrote %q, API served %q", b, caPEM)
		}
	})
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("GET /v1/ca.pem is not a PEM certificate: %q", caPEM)
	}

	sb := newSandbox(t, c, sdk.CreateSandboxParams{})
	if _, err := sb.Files().Write(ctx, "/root/srv.py", []byte(portServer)); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.StartBackground(ctx, "python3 /root/srv.py", sdk.ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	host := sb.PortHost(8000)
	_, port, _ := net.SplitHostPort(main.tlsAddr)
	httpsClient := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, main.tlsAddr) // every name resolves to the listener
		},
	}}
	get := func(url, key string) (int, string, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := httpsClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	url := fmt.Sprintf("https://%s:%s/", host, port)
	var body string
	eventually(t, 60*time.Second, "the sandbox's server to answer over TLS", func() bool {
		code, b, err := get(url, key)
		body = b
		return err == nil && code == 200
	})
	if want := fmt.Sprintf("hello from %s:%s auth=None", host, port); body != want {
		t.Fatalf("body %q, want %q", body, want)
	}
	t.Run("curl with the CA", func(t *testing.T) {
		out, err := exec.Command("curl", "-sS", "--max-time", "60", "--cacert", caFile,
			"--resolve", host+":"+port+":127.0.0.1", "-H", "Authorization: Bearer "+key, url).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "hello from "+host) {
			t.Fatalf("curl: %v\n%s", err, out)
		}
	})
	t.Run("access rules hold over TLS", func(t *testing.T) {
		if code, _, err := get(url, ""); err != nil || code != 401 {
			t.Fatalf("no key: %d %v", code, err)
		}
	})
	t.Run("the API itself over TLS", func(t *testing.T) {
		code, b, err := get("https://localhost:"+port+"/v1/health", "")
		if err != nil || code != 200 || !strings.Contains(b, `"status"`) {
			t.Fatalf("%d %q %v", code, b, err)
		}
	})
	t.Run("a signed URL asked over TLS is https", func(t *testing.T) {
		u, err := sdk.NewClient(sdk.WithBaseURL("https://localhost:"+port), sdk.WithAPIKey(key), sdk.WithHTTPClient(httpsClient)).
			Sandbox(sb.ID).SignPortURL(ctx, 8000, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(u.URL, "https://"+host+":"+port+"/?ps_token=") {
			t.Fatalf("signed URL %q", u.URL)
		}
		code, b, err := get(u.URL, "")
		if err != nil || code != 200 || !strings.HasPrefix(b, "hello from") {
			t.Fatalf("%d %q %v", code, b, err)
		}
	})
	t.Run("a request wakes a hibernated sandbox", func(t *testing.T) {
		if err := sb.Hibernate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := sb.Refresh(ctx); err != nil || sb.State != "hibernated" {
			t.Fatalf("state %q %v, want hibernated", sb.State, err)
		}
		code, b, err := get(url, key)
		if err != nil || code != 200 || !strings.HasPrefix(b, "hello from") {
			t.Fatalf("after hibernate: %d %q %v", code, b, err)
		}
		if err := sb.Refresh(ctx); err != nil || sb.State != "running" {
			t.Fatalf("state %q %v, want running after the request", sb.State, err)
		}
	})
	t.Run("an unknown name is refused with an alert", func(t *testing.T) {
		conn, err := tls.Dial("tcp", main.tlsAddr, &tls.Config{ServerName: "nobody.example.com", RootCAs: roots})
		if err == nil {
			conn.Close()
			t.Fatal("handshake for an unknown name succeeded")
		}
		if !strings.Contains(err.Error(), "unrecognized name") {
			t.Fatalf("%v, want the unrecognized_name alert", err)
		}
	})
}
