package router

import (
	"errors"
	"syscall"
)

// transientAccept reports whether an accept failed for a reason that
// passes: the process or the system out of file descriptors (every
// connection of a crowd of clients holds one; they come back as
// connections close) or a client gone before it was accepted. The loop
// waits a moment and accepts again rather than stopping the listener for
// good.
func transientAccept(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}
