package sqlhttp

import (
	"context"
	"net"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgproto3"
)

// fakePostgres is a fake, for the pool's unit tests only: it speaks just
// enough of PostgreSQL's protocol over net.Pipe (cleartext password, the
// simple query protocol) to count sessions and see what runs on them. The
// real PostgreSQL in a database's machine is exercised by internal/e2e.
type fakePostgres struct {
	passwords map[string]bool // accepted

	mu       sync.Mutex
	sessions int      // authenticated sessions opened
	open     int      // of those, still open
	queries  []string // every query, in order
}

// Dial is a router.Backend's: a new session on a pipe.
func (f *fakePostgres) Dial(context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	go f.serve(server)
	return client, nil
}

func (f *fakePostgres) serve(c net.Conn) {
	defer c.Close()
	b := pgproto3.NewBackend(c, c)
	if _, err := b.ReceiveStartupMessage(); err != nil {
		return
	}
	b.Send(&pgproto3.AuthenticationCleartextPassword{})
	if b.Flush() != nil || b.SetAuthType(pgproto3.AuthTypeCleartextPassword) != nil {
		return
	}
	msg, err := b.Receive()
	pw, ok := msg.(*pgproto3.PasswordMessage)
	if err != nil || !ok || !f.passwords[pw.Password] {
		b.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
		_ = b.Flush()
		return
	}
	f.mu.Lock()
	f.sessions++
	f.open++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.open--
		f.mu.Unlock()
	}()
	b.Send(&pgproto3.AuthenticationOk{})
	b.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	b.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	tx := byte('I')
	for {
		if b.Flush() != nil {
			return
		}
		msg, err := b.Receive()
		if err != nil {
			return
		}
		q, ok := msg.(*pgproto3.Query)
		if !ok { // Terminate, or what this fake does not speak
			return
		}
		f.mu.Lock()
		f.queries = append(f.queries, q.String)
		f.mu.Unlock()
		switch strings.ToUpper(q.String) {
		case "BEGIN":
			tx = 'T'
		case "COMMIT", "ROLLBACK":
			tx = 'I'
		}
		b.Send(&pgproto3.CommandComplete{CommandTag: []byte(strings.ToUpper(strings.Fields(q.String + " X")[0]))})
		b.Send(&pgproto3.ReadyForQuery{TxStatus: tx})
	}
}

func (f *fakePostgres) counts() (sessions, open int, queries []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions, f.open, append([]string(nil), f.queries...)
}
