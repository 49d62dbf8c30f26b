package pgbouncer

import (
	"fmt"
	"strings"
	"testing"
)

// TestRuntimeIni: the running pooler takes MaxClients clients, under a
// file limit that holds them, listens on the loopback and the machine's
// NIC, and keeps the rest of the template's configuration (the
// replacement fails loudly if Ini's text changes).
func TestRuntimeIni(t *testing.T) {
	want := fmt.Sprintf("max_client_conn = %d\n", MaxClients)
	if !strings.Contains(RuntimeIni, want) || strings.Contains(RuntimeIni, "max_client_conn = 1000\n") {
		t.Fatalf("RuntimeIni does not set %q:\n%s", want, RuntimeIni)
	}
	listen := "listen_addr = " + RuntimeListen + "\n"
	if !strings.Contains(RuntimeIni, listen) {
		t.Fatalf("RuntimeIni does not listen on the NIC (%q):\n%s", listen, RuntimeIni)
	}
	server := "* = host=" + SocketDir + " port=5432\n"
	if !strings.Contains(RuntimeIni, server) {
		t.Fatalf("RuntimeIni does not reach the server on its socket (%q):\n%s", server, RuntimeIni)
	}
	for _, l := range []string{"auth_user = postgres\n", "auth_dbname = postgres\n", "auth_query = SELECT rolname, "} {
		if !strings.Contains(RuntimeIni, l) {
			t.Fatalf("RuntimeIni does not look clients up (%q):\n%s", l, RuntimeIni)
		}
	}
	if !strings.Contains(AuthQuery, "$1") || !strings.Contains(AuthQuery, "rolcanlogin") {
		t.Fatalf("AuthQuery %q", AuthQuery)
	}
	back := strings.NewReplacer(want, "max_client_conn = 1000\n", listen, "listen_addr = 127.0.0.1\n",
		server, "* = host=127.0.0.1 port=5432\n", runtimeAuth, "").Replace(RuntimeIni)
	if back != Ini {
		t.Fatal("RuntimeIni differs from Ini in more than max_client_conn, listen_addr, the server's address and the lookup")
	}
	if FileLimit < MaxClients+200 {
		t.Fatalf("file limit %d cannot hold %d clients and their server connections", FileLimit, MaxClients)
	}
}
