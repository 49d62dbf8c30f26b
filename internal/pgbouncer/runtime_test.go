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
	back := strings.NewReplacer(want, "max_client_conn = 1000\n", listen, "listen_addr = 127.0.0.1\n").Replace(RuntimeIni)
	if back != Ini {
		t.Fatal("RuntimeIni differs from Ini in more than max_client_conn and listen_addr")
	}
	if FileLimit < MaxClients+200 {
		t.Fatalf("file limit %d cannot hold %d clients and their server connections", FileLimit, MaxClients)
	}
}
