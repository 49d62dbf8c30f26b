package hostagent

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
	"github.com/pandastack/pandastack/internal/hostapi"
)

// lowSpace is the free space under which a save is taken for a full disk
// when it fails without saying why (QEMU reports a failed migration as
// text, not an errno).
const lowSpace = 16 << 20

// checkSpace refuses to pause a sandbox for a save into dir when dir's
// filesystem has less free space than the sandbox's memory: after a save
// every page the sandbox writes needs a block of its own (the saved copy
// keeps the old one), so a save onto a nearly full disk would put the
// running sandbox itself at risk.
func checkSpace(dir string, rec hostapi.Machine) error {
	need := int64(rec.MemoryMiB) << 20
	free, err := cowfs.FreeFor(dir, need)
	if err != nil {
		return fmt.Errorf("check free space: %w", err)
	}
	if free < need {
		return &pandastack.Error{Code: pandastack.EInsufficientStorage,
			Message: fmt.Sprintf("not enough disk space on the host to save sandbox %s (%d MiB free, %d MiB needed); nothing was saved and it keeps running", rec.ID, free>>20, need>>20)}
	}
	return nil
}

// isNoSpace reports whether a failed save into dir failed for want of
// disk space: ENOSPC (or EDQUOT) in the chain, QEMU's text for it, or a
// filesystem left (nearly) full.
func isNoSpace(err error, dir string) bool {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	if strings.Contains(err.Error(), "No space left on device") {
		return true
	}
	free, ferr := cowfs.Free(dir)
	return ferr == nil && free < lowSpace
}

// saveError is what a user is told when a save into dir failed: 507
// insufficient_storage when the disk is full, otherwise unavailable with
// failMsg.
func saveError(err error, dir, id, failMsg string) error {
	if isNoSpace(err, dir) {
		return &pandastack.Error{Code: pandastack.EInsufficientStorage,
			Message: fmt.Sprintf("the host's disk is full: sandbox %s was not saved and keeps running", id), Err: err}
	}
	return &pandastack.Error{Code: pandastack.EUnavailable, Message: failMsg, Err: err}
}
