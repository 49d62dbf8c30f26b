package functions

import (
	"context"
	"slices"
)

// DefaultPrewarmVersions is how many function versions keep processes
// prepared for their snapshot, the most recently deployed or invoked.
const DefaultPrewarmVersions = 4

// A fresh invocation restores a new microVM from its version's snapshot.
// The host restores into a QEMU process prepared ahead of time; one
// prepared for the template the function was baked from has that
// template's memory, so the invocation's restore first clones the
// function's memory over it, and the guest then takes its first touch of
// every page it uses from the filesystem: under TCG here that was most of
// the guest agent's first answer (~150 of ~200 ms). A process prepared for
// the function's own snapshot has its memory cloned and read in already.
// Each is a new QEMU process that has run nothing, so isolation is the
// same: nothing passes between invocations.
//
// Prepared processes hold memory (their page cache), so only the
// versions invoked or deployed most recently keep theirs
// (Config.PrewarmVersions); a new version or a delete drops the old ones'.

// prewarmedVersion is one version whose snapshot has prepared processes.
type prewarmedVersion struct{ function, snapshot string }

// prewarm keeps processes prepared for function fnID's version snapshot
// and marks it the most recently used; the least recently used past
// Config.PrewarmVersions, and fnID's other versions, are dropped.
func (s *Service) prewarm(ctx context.Context, fnID, snapshot string) {
	if s.cfg.Prewarm == nil || s.cfg.PrewarmSize <= 0 || snapshot == "" {
		return
	}
	s.mu.Lock()
	i := slices.IndexFunc(s.prewarmed, func(p prewarmedVersion) bool { return p.snapshot == snapshot })
	known := i >= 0
	if known {
		s.prewarmed = slices.Delete(s.prewarmed, i, i+1)
	}
	var drop []string
	s.prewarmed = slices.DeleteFunc(s.prewarmed, func(p prewarmedVersion) bool {
		if p.function == fnID {
			drop = append(drop, p.snapshot)
			return true
		}
		return false
	})
	s.prewarmed = append(s.prewarmed, prewarmedVersion{fnID, snapshot})
	for len(s.prewarmed) > s.cfg.PrewarmVersions {
		drop = append(drop, s.prewarmed[0].snapshot)
		s.prewarmed = s.prewarmed[1:]
	}
	s.mu.Unlock()
	s.dropPrewarmed(ctx, drop)
	if known {
		return // its processes are there, or being prepared
	}
	if err := s.cfg.Prewarm(ctx, snapshot, s.cfg.PrewarmSize); err != nil {
		s.log.Warn("prepare processes for a function's snapshot", "snapshot", snapshot, "err", err)
		s.mu.Lock()
		s.prewarmed = slices.DeleteFunc(s.prewarmed, func(p prewarmedVersion) bool { return p.snapshot == snapshot })
		s.mu.Unlock()
	}
}

// unprewarm drops the prepared processes of function fnID's versions (it
// is deleted).
func (s *Service) unprewarm(ctx context.Context, fnID string) {
	var drop []string
	s.mu.Lock()
	s.prewarmed = slices.DeleteFunc(s.prewarmed, func(p prewarmedVersion) bool {
		if p.function == fnID {
			drop = append(drop, p.snapshot)
			return true
		}
		return false
	})
	s.mu.Unlock()
	s.dropPrewarmed(ctx, drop)
}

func (s *Service) dropPrewarmed(ctx context.Context, snapshots []string) {
	for _, id := range snapshots {
		if err := s.cfg.Prewarm(ctx, id, 0); err != nil {
			s.log.Warn("drop the processes prepared for a function's snapshot", "snapshot", id, "err", err)
		}
	}
}
