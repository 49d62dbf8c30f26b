package pgrouter

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"sync"
	"time"

	"github.com/pandastack/pandastack/internal/router"
)

// Cancel requests arrive on a connection of their own and carry only the
// backend's process id and secret key: no host name, and in plain text
// from clients before libpq 17. The router learns each session's key
// from the BackendKeyData the database sends at startup and sends a
// cancel carrying it to that database.

// maxScanned bounds a message read while looking for BackendKeyData; a
// longer one (none is, before ReadyForQuery) ends the looking.
const maxScanned = 64 << 10

// cancelWait bounds waiting for the database to close a forwarded
// cancel's connection.
const cancelWait = 2 * time.Second

// cancelKeys maps the (pid, secret) of live sessions to their database.
type cancelKeys struct {
	mu   sync.Mutex
	keys map[string]router.Backend
}

func (k *cancelKeys) add(key string, b router.Backend) {
	k.mu.Lock()
	if k.keys == nil {
		k.keys = map[string]router.Backend{}
	}
	k.keys[key] = b
	k.mu.Unlock()
}

func (k *cancelKeys) remove(key string) {
	k.mu.Lock()
	delete(k.keys, key)
	k.mu.Unlock()
}

func (k *cancelKeys) lookup(key string) (router.Backend, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, ok := k.keys[key]
	return b, ok
}

// relayStartup copies the database's messages to the client until the
// first ReadyForQuery (or anything unexpected), calling onKey with the
// BackendKeyData body it sees, then copies the rest unread. It returns
// when raw ends.
func relayStartup(dst io.Writer, raw io.Reader, onKey func(body []byte)) {
	src := bufio.NewReaderSize(raw, 1<<10)
	for {
		hdr, err := src.Peek(5)
		if err != nil {
			break
		}
		n := int(binary.BigEndian.Uint32(hdr[1:5]))
		if n < 4 || n > maxScanned {
			break
		}
		msg := make([]byte, 1+n)
		if _, err := io.ReadFull(src, msg); err != nil {
			return
		}
		if msg[0] == 'K' {
			onKey(msg[5:])
		}
		if _, err := dst.Write(msg); err != nil {
			return
		}
		if msg[0] == 'Z' || msg[0] == 'E' {
			break
		}
	}
	// What the reader holds, then the stream itself: the reader's buffer
	// is not kept for the session's life (copyLean).
	if n := src.Buffered(); n > 0 {
		b, _ := src.Peek(n)
		if _, err := dst.Write(b); err != nil {
			return
		}
		_, _ = src.Discard(n)
	}
	_ = copyLean(dst, raw)
}

// forwardCancel sends a CancelRequest packet (its body: pid and secret)
// to the database whose session has that key; an unknown key is dropped,
// as PostgreSQL drops a cancel that matches no backend.
func (l *Listener) forwardCancel(body []byte, log func(msg string, args ...any)) {
	b, ok := l.cancel.lookup(string(body))
	if !ok {
		log("database router: cancel request for no known session")
		return
	}
	ctx, cancel := contextDial(l.cfg.HandshakeTimeout)
	defer cancel()
	c, err := b.Dial(ctx)
	if err != nil {
		log("database router: cancel request: database unreachable", "err", err)
		return
	}
	defer c.Close()
	pkt := make([]byte, 8+len(body))
	binary.BigEndian.PutUint32(pkt, uint32(len(pkt)))
	binary.BigEndian.PutUint32(pkt[4:], codeCancel)
	copy(pkt[8:], body)
	_, _ = c.Write(pkt)
	// PostgreSQL answers nothing and closes (the guest's port forward
	// passes the close on): wait for that, so the cancel is delivered
	// before the client's connection ends, but not for a database that
	// never closes.
	_ = c.SetReadDeadline(time.Now().Add(cancelWait))
	_, _ = io.Copy(io.Discard, c)
}

func contextDial(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
