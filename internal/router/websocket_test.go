package router_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/router"
	"golang.org/x/net/websocket"
)

// A WebSocket to a sandbox port, over TLS terminated by the SNI listener:
// the upgrade survives both hops and messages flow both ways.
func TestWebSocketOverTLS(t *testing.T) {
	e := startTLS(t)
	sbs := newSandboxes()
	sbs.add(sbx, "team_acme")
	sbs.listen(t, sbx, 8000, websocket.Handler(func(ws *websocket.Conn) {
		var msg string
		for websocket.Message.Receive(ws, &msg) == nil {
			websocket.Message.Send(ws, strings.ToUpper(msg))
		}
	}))
	h := router.NewHTTP(router.HTTPConfig{Domain: "sandbox.test", Sandboxes: sbs, Guests: sbs})
	// Serve HTTP names with the router this time.
	httpLn := router.NewConnListener(nil)
	srv := &http.Server{Handler: front(h)}
	go srv.Serve(httpLn)
	defer srv.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := router.NewTLS(tcp, router.TLSConfig{Table: e.table, HTTPHost: h.Owns, ServeHTTP: func(c *tls.Conn) { httpLn.Put(c) }, Certs: e.ca})
	go ln.Serve()
	defer ln.Close()

	host := "8000-" + sbx + ".sandbox.test"
	cfg, err := websocket.NewConfig("wss://"+host+"/ws", "https://"+host)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Header.Set("Authorization", "Bearer key-acme")
	cfg.TlsConfig = &tls.Config{ServerName: host, RootCAs: e.roots()}
	raw, err := net.Dial("tcp", tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	tc := tls.Client(raw, cfg.TlsConfig)
	ws, err := websocket.NewClient(cfg, tc)
	if err != nil {
		t.Fatalf("upgrade through the router over TLS: %v", err)
	}
	defer ws.Close()
	for _, msg := range []string{"ping", strings.Repeat("long ", 1000)} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := websocket.Message.Receive(ws, &got); err != nil || got != strings.ToUpper(msg) {
			t.Fatalf("echo of %d bytes: %q %v", len(msg), got, err)
		}
	}
}
