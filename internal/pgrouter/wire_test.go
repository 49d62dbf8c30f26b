package pgrouter

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/jackc/pgx/v5/pgproto3"
)

// A StartupMessage encoded by pgx's own protocol package parses, and what
// the router re-encodes (the endpoint option taken out) pgx decodes again.
func TestStartupRoundTripsWithPgproto3(t *testing.T) {
	msg := &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber, Parameters: map[string]string{
		"user": "orders_owner", "database": "orders", "options": "-c search_path=app endpoint=db-abc", "application_name": "psql"}}
	raw, err := msg.Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := readPacket(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if p.code != protocol3 {
		t.Fatalf("code %d, want %d", p.code, protocol3)
	}
	st, err := parseStartup(p.body)
	if err != nil {
		t.Fatal(err)
	}
	id, st, err := resolve("", "db.localhost", st)
	if err != nil || id != "db-abc" {
		t.Fatalf("resolve: %q %v", id, err)
	}
	var back pgproto3.StartupMessage
	out := st.encode()
	if err := back.Decode(out[4:]); err != nil {
		t.Fatalf("pgproto3 cannot decode the re-encoded startup: %v", err)
	}
	want := map[string]string{"user": "orders_owner", "database": "orders", "options": "-c search_path=app", "application_name": "psql"}
	if len(back.Parameters) != len(want) {
		t.Fatalf("parameters %v, want %v", back.Parameters, want)
	}
	for k, v := range want {
		if back.Parameters[k] != v {
			t.Errorf("%s = %q, want %q", k, back.Parameters[k], v)
		}
	}
}

func TestOptionsWithOnlyTheEndpointAreDropped(t *testing.T) {
	st, err := parseStartup([]byte("user\x00u\x00options\x00endpoint=db-1\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	_, st, err = resolve("", "db.localhost", st)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.values["options"]; ok || len(st.keys) != 1 {
		t.Fatalf("options left in %v %v: the server behind would reject an empty or foreign option", st.keys, st.values)
	}
}

func TestBadStartupPacketsAreRejected(t *testing.T) {
	for name, body := range map[string]string{
		"unterminated":    "user\x00u\x00",
		"no value":        "user\x00",
		"no user":         "database\x00d\x00\x00",
		"empty user":      "user\x00\x00\x00",
		"repeated":        "user\x00u\x00user\x00v\x00\x00",
		"bytes after end": "user\x00u\x00\x00x",
		"empty":           "",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseStartup([]byte(body)); err == nil {
				t.Fatal("parsed")
			}
		})
	}
	for name, n := range map[string]uint32{"too short": 4, "too long": maxStartup + 1} {
		t.Run(name, func(t *testing.T) {
			var b [8]byte
			binary.BigEndian.PutUint32(b[:], n)
			binary.BigEndian.PutUint32(b[4:], protocol3)
			if _, err := readPacket(bytes.NewReader(b[:])); err == nil {
				t.Fatal("read")
			}
		})
	}
}

// The router's refusals are ErrorResponses pgx decodes into the fields a
// client prints.
func TestErrorResponseDecodesWithPgproto3(t *testing.T) {
	raw := errorResponse(stateInvalidAuthSpec, "connection is insecure (try using sslmode=require)")
	if raw[0] != 'E' || int(binary.BigEndian.Uint32(raw[1:5])) != len(raw)-1 {
		t.Fatalf("framing %q", raw)
	}
	var e pgproto3.ErrorResponse
	if err := e.Decode(raw[5:]); err != nil {
		t.Fatal(err)
	}
	if e.Severity != "FATAL" || e.Code != "28000" || e.Message != "connection is insecure (try using sslmode=require)" {
		t.Fatalf("decoded %+v", e)
	}
}

func TestDatabaseIsNamedBySNIOrOptions(t *testing.T) {
	const domain = "db.example.com"
	for _, tc := range []struct {
		name, sni, options, want string
		fails                    bool
	}{
		{name: "sni", sni: "db-1.db.example.com", want: "db-1"},
		{name: "sni any case and a trailing dot", sni: "DB-1.DB.Example.com.", want: "db-1"},
		{name: "options without sni", options: "endpoint=db-2", want: "db-2"},
		{name: "options among others", options: "-c statement_timeout=5s endpoint=db-2", want: "db-2"},
		{name: "sni and the same options", sni: "db-3.db.example.com", options: "endpoint=db-3", want: "db-3"},
		{name: "sni and other options", sni: "db-3.db.example.com", options: "endpoint=db-4", fails: true},
		{name: "sni of another domain, no options", sni: "db-1.example.org", fails: true},
		{name: "sni of another domain falls back to options", sni: "x.example.org", options: "endpoint=db-5", want: "db-5"},
		{name: "deeper name", sni: "a.db-1.db.example.com", fails: true},
		{name: "the domain itself", sni: "db.example.com", fails: true},
		{name: "nothing", fails: true},
		{name: "endpoint twice", options: "endpoint=db-1 endpoint=db-2", fails: true},
		{name: "endpoint not a label", options: "endpoint=a.b", fails: true},
		{name: "empty endpoint", options: "endpoint=", fails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := startup{values: map[string]string{"user": "u"}, keys: []string{"user"}}
			if tc.options != "" {
				st.set("options", tc.options)
			}
			id, _, err := resolve(tc.sni, domain, st)
			if tc.fails {
				if err == nil {
					t.Fatalf("resolved %q", id)
				}
				return
			}
			if err != nil || id != tc.want {
				t.Fatalf("resolved %q, %v; want %q", id, err, tc.want)
			}
		})
	}
}
