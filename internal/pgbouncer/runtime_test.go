package pgbouncer

import (
	"fmt"
	"strings"
	"testing"
)

// TestRuntimeIni: the running pooler takes MaxClients clients, under a
// file limit that holds them, and keeps the rest of the template's
// configuration (the replacement fails loudly if Ini's text changes).
func TestRuntimeIni(t *testing.T) {
	want := fmt.Sprintf("max_client_conn = %d\n", MaxClients)
	if !strings.Contains(RuntimeIni, want) || strings.Contains(RuntimeIni, "max_client_conn = 1000\n") {
		t.Fatalf("RuntimeIni does not set %q:\n%s", want, RuntimeIni)
	}
	if strings.Replace(RuntimeIni, want, "max_client_conn = 1000\n", 1) != Ini {
		t.Fatal("RuntimeIni differs from Ini in more than max_client_conn")
	}
	if FileLimit < MaxClients+200 {
		t.Fatalf("file limit %d cannot hold %d clients and their server connections", FileLimit, MaxClients)
	}
}
