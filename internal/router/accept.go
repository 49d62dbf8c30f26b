package router

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Acceptor serves a listener's connections, each in a goroutine of its
// own, and keeps them, so that Close can end every one and wait for its
// goroutine: the accept loop the SNI listener and the database router
// (internal/pgrouter) share.
type Acceptor struct {
	ln   net.Listener
	what string // what a connection is, for errors ("TLS connection")

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewAcceptor returns an Acceptor of ln; what names its connections in
// errors.
func NewAcceptor(ln net.Listener, what string) *Acceptor {
	return &Acceptor{ln: ln, what: what, conns: map[net.Conn]struct{}{}}
}

// Addr is the listening address.
func (a *Acceptor) Addr() net.Addr { return a.ln.Addr() }

// Serve accepts until Close, calling handle for each connection in its own
// goroutine and closing the connection when handle returns. It returns nil
// after Close.
func (a *Acceptor) Serve(handle func(net.Conn)) error {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			a.mu.Lock()
			closed := a.closed
			a.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || transientAccept(err) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept %s: %w", a.what, err)
		}
		if !a.track(c) {
			c.Close()
			return nil
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer a.untrack(c)
			handle(c)
		}()
	}
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (a *Acceptor) Close() error {
	a.mu.Lock()
	a.closed = true
	for c := range a.conns {
		c.Close()
	}
	a.mu.Unlock()
	err := a.ln.Close()
	a.wg.Wait()
	return err
}

func (a *Acceptor) track(c net.Conn) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.conns[c] = struct{}{}
	return true
}

func (a *Acceptor) untrack(c net.Conn) {
	a.mu.Lock()
	delete(a.conns, c)
	a.mu.Unlock()
	c.Close()
}
