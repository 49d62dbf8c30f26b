package router

import (
	"net"
	"sync"
)

// ConnListener is a net.Listener whose connections are handed to it with
// Put: an http.Server serves, through it, the connections the SNI listener
// terminated for HTTP names.
type ConnListener struct {
	addr net.Addr
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

// NewConnListener returns an empty ConnListener reporting addr.
func NewConnListener(addr net.Addr) *ConnListener {
	return &ConnListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

// Put hands c to Accept; after Close it closes c instead.
func (l *ConnListener) Put(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next connection handed over.
func (l *ConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close makes Accept return net.ErrClosed.
func (l *ConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// Addr is the address given to NewConnListener.
func (l *ConnListener) Addr() net.Addr { return l.addr }

// LimitPerClient wraps ln so that one client address holds at most max
// connections at once: a connection over the limit is closed as soon as it
// is accepted. max <= 0 means no limit.
func LimitPerClient(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return &limitListener{Listener: ln, max: max, count: map[string]int{}}
}

type limitListener struct {
	net.Listener
	max   int
	mu    sync.Mutex
	count map[string]int
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := clientIP(c.RemoteAddr())
		l.mu.Lock()
		over := l.count[ip] >= l.max
		if !over {
			l.count[ip]++
		}
		l.mu.Unlock()
		if over {
			c.Close()
			continue
		}
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *limitListener) release(ip string) {
	l.mu.Lock()
	if l.count[ip]--; l.count[ip] <= 0 {
		delete(l.count, ip)
	}
	l.mu.Unlock()
}

func clientIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// countedConn gives its slot back once, at the first Close.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes the TCP connection (the SNI listener's pipes).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
