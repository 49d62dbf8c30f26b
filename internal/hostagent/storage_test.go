package hostagent

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/hostapi"
)

func TestSaveError(t *testing.T) {
	dir := t.TempDir() // plenty of space: only the error decides
	tests := []struct {
		name string
		err  error
		code string
	}{
		{"ENOSPC from a clone", fmt.Errorf("checkpoint x: clone mem: %w", &os.PathError{Op: "ioctl", Path: "mem", Err: syscall.ENOSPC}), pandastack.EInsufficientStorage},
		{"EDQUOT", fmt.Errorf("checkpoint x: %w", syscall.EDQUOT), pandastack.EInsufficientStorage},
		{"QEMU's migration text", errors.New(`migrate: failed to save: No space left on device`), pandastack.EInsufficientStorage},
		{"another failure", errors.New("qmp: connection reset"), pandastack.EUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := saveError(tt.err, dir, "sbx_1", "could not save")
			if got := pandastack.ErrorCode(err); got != tt.code {
				t.Fatalf("code %q, want %q (%v)", got, tt.code, err)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("%v does not wrap the cause", err)
			}
		})
	}
}

func TestCheckSpace(t *testing.T) {
	dir := t.TempDir()
	if err := checkSpace(dir, hostapi.Machine{ID: "sbx_1", MemoryMiB: 1}); err != nil {
		t.Fatalf("1 MiB sandbox: %v", err)
	}
	err := checkSpace(dir, hostapi.Machine{ID: "sbx_1", MemoryMiB: 1 << 40})
	if pandastack.ErrorCode(err) != pandastack.EInsufficientStorage {
		t.Fatalf("a sandbox larger than the disk: %v, want insufficient_storage", err)
	}
}
