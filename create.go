package pandastack

import "strings"

// Size limits of a create or a build.
const (
	MaxCPUs      = 8
	MinMemoryMiB = 128
	MaxMemoryMiB = 16384
	MaxDiskGiB   = 256
)

// CheckSize validates a size asked for (0 in a field: the template's).
func CheckSize(cpus, memMiB, diskGiB int) error {
	if cpus < 0 || cpus > MaxCPUs {
		return Errorf(EInvalid, "cpus must be between 1 and %d, got %d", MaxCPUs, cpus)
	}
	if memMiB != 0 && (memMiB < MinMemoryMiB || memMiB > MaxMemoryMiB) {
		return Errorf(EInvalid, "memory_mib must be between %d and %d, got %d", MinMemoryMiB, MaxMemoryMiB, memMiB)
	}
	if diskGiB < 0 || diskGiB > MaxDiskGiB {
		return Errorf(EInvalid, "disk_gib must be between 1 and %d (and not below the template's disk), got %d", MaxDiskGiB, diskGiB)
	}
	return nil
}

// CheckEnv validates environment variables.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return Errorf(EInvalid, "env: invalid variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return Errorf(EInvalid, "env: value of %s contains a NUL byte", k)
		}
	}
	return nil
}
