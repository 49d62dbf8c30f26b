package guest

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A wait ends on the port's SIGIO, not on its bound: a pipe signals like
// the virtio port does when data (on the port: a host's connect) arrives.
func TestHostWaitEndsOnSIGIO(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	h := newHostWait(r)
	h.max = time.Minute
	for range hostSpins {
		h.wait() // the first polls of a disconnect: 2 ms sleeps
	}
	if h.armed {
		t.Fatal("SIGIO asked for during the first polls")
	}
	t0 := time.Now()
	h.wait() // arms: returns at once
	if !h.armed {
		t.Fatal("the first wait did not ask for SIGIO")
	}
	if fl := flags(t, r); fl&unix.O_ASYNC == 0 {
		t.Fatalf("port flags %#x lack O_ASYNC", fl)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		w.Write([]byte{1})
	}()
	h.wait()
	if d := time.Since(t0); d > 30*time.Second {
		t.Fatalf("the wait ended after %s: on its bound, not on the signal", d)
	}
	h.connected()
	if fl := flags(t, r); fl&unix.O_ASYNC != 0 || h.armed {
		t.Fatalf("after a frame the port still signals (flags %#x)", fl)
	}
	if h.spins != hostSpins {
		t.Fatalf("after a frame %d polls are left before SIGIO, want %d", h.spins, hostSpins)
	}
}

// Without a pollable port (tests' unix sockets are not devices) a wait
// is the old short sleep.
func TestHostWaitWithoutAPortSleeps(t *testing.T) {
	h := newHostWait(struct{}{})
	if h != nil {
		t.Fatal("a port without a file descriptor got a SIGIO wait")
	}
	t0 := time.Now()
	h.wait()
	h.connected()
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("a nil wait took %s", d)
	}
}

func flags(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl int
	var ferr error
	if err := rc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	return fl
}
