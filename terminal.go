package pandastack

import (
	"context"
	"io"
)

// TerminalRequest starts a command on a pseudo-terminal in a sandbox. With
// neither Cmd nor Args the user's login shell runs.
type TerminalRequest struct {
	Cmd            string            `json:"cmd,omitempty"`
	Args           []string          `json:"args,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	User           string            `json:"user,omitempty"`
	Rows           int               `json:"rows"`
	Cols           int               `json:"cols"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
}

// MaxTerminalSide bounds a terminal's rows and columns.
const MaxTerminalSide = 4096

// Terminal is a command running on a pseudo-terminal. Read returns the
// terminal's output bytes as the program wrote them (escape sequences and
// all; stdout and stderr are one stream on a terminal) and io.EOF once the
// command has ended and its output is drained; Wait then says how it ended.
// Write types input. Close kills the command. Read is for one goroutine;
// the other methods may be called from any.
type Terminal interface {
	io.ReadWriteCloser
	PID() int
	Resize(ctx context.Context, rows, cols int) error
	// Signal goes to the terminal's foreground process group (what ^C
	// would reach); KILL ends the whole command.
	Signal(ctx context.Context, signal string) error
	// Wait returns how the command ended, after Read returned io.EOF.
	Wait() (ExecResult, error)
}

// CheckTerminalSize says whether rows×cols is a terminal size we accept.
func CheckTerminalSize(rows, cols int) error {
	if rows < 1 || cols < 1 || rows > MaxTerminalSide || cols > MaxTerminalSide {
		return Errorf(EInvalid, "terminal size %dx%d: rows and cols must be between 1 and %d", cols, rows, MaxTerminalSide)
	}
	return nil
}

// FileEvent is one change under a watched directory (Guest.WatchDir).
// Path, and From for a rename, are relative to the watched directory. Type
// is "create", "write", "remove", "rename", "chmod", or "overflow" (events
// were lost: list the directory again).
type FileEvent struct {
	Type  string `json:"type"`
	Path  string `json:"path,omitempty"`
	From  string `json:"from,omitempty"`
	IsDir bool   `json:"is_dir,omitempty"`
}
