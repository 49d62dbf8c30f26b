package router

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// flakyListener fails its first accepts with errno, then accepts from ln.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
	errno syscall.Errno
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", l.errno)}
	}
	return l.Listener.Accept()
}

// TestAcceptorOutlivesFileExhaustion: a listener out of file descriptors
// (too many clients at once) keeps serving once descriptors come back,
// instead of its accept loop ending for good.
func TestAcceptorOutlivesFileExhaustion(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fl := &flakyListener{Listener: ln, errno: errno}
			fl.fails.Store(3)
			a := NewAcceptor(fl, "test connection")
			served := make(chan struct{}, 1)
			done := make(chan error, 1)
			go func() { done <- a.Serve(func(c net.Conn) { served <- struct{}{} }) }()
			defer a.Close()
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			select {
			case <-served:
			case err := <-done:
				t.Fatalf("the accept loop ended: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("the connection was never served")
			}
		})
	}
}
