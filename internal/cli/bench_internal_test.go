package cli

import "testing"

func TestParseWrk(t *testing.T) {
	ok := "Running 5s test @ http://127.0.0.1:8080/ok.txt\n  2 threads and 8 connections\n  1523 requests in 5.00s, 300.00KB read\nRequests/sec:    304.52\nTransfer/sec:     60.00KB\n"
	if v, err := parseWrk(ok); err != nil || v != 304.52 {
		t.Errorf("parseWrk = %v, %v; want 304.52", v, err)
	}
	for _, bad := range []string{ok + "  Non-2xx or 3xx responses: 12\n", "  Socket errors: connect 0, read 3, write 0, timeout 0\n" + ok, "no numbers"} {
		if _, err := parseWrk(bad); err == nil {
			t.Errorf("parseWrk accepted %q", bad)
		}
	}
}
