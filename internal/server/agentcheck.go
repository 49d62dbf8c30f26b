package server

import (
	"debug/elf"
	"fmt"
)

// checkAgent refuses a guest agent the guest cannot run: it is the
// initramfs's /init, and the initramfs holds no C library, so a binary
// linked against one (a plain `go build` of a program that uses package
// net picks cgo) panics the guest kernel with "No working init found" —
// a failure far from its cause.
func checkAgent(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("guest agent %s: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return fmt.Errorf("guest agent %s is built for %v, the guests are x86-64", path, f.Machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("guest agent %s is dynamically linked; build it static: CGO_ENABLED=0 go build -o %s ./cmd/pandastack-guest (scripts/setup does)", path, path)
		}
	}
	return nil
}
