package pandastack

import (
	"path"
	"regexp"
	"strings"
)

var mountPathChars = regexp.MustCompile(`^(/[A-Za-z0-9_.-]+)+$`)

// CheckVolumeMounts validates a create's volume mounts: at most
// MaxVolumeMounts, each volume once, each at its own absolute path (plain
// characters, not a system directory).
func CheckVolumeMounts(mounts []VolumeMount) error {
	if len(mounts) > MaxVolumeMounts {
		return Errorf(EInvalid, "at most %d volumes per sandbox", MaxVolumeMounts)
	}
	seenVol, seenPath := map[string]bool{}, map[string]bool{}
	for _, m := range mounts {
		if m.Volume == "" {
			return Errorf(EInvalid, "volumes: each needs a volume (id or name)")
		}
		p := m.Path
		if !mountPathChars.MatchString(p) || path.Clean(p) != p || len(p) > 200 {
			return Errorf(EInvalid, "volume mount path %q: use an absolute path of letters, digits, '_', '.', '-' (not /)", p)
		}
		for _, sys := range []string{"/proc", "/sys", "/dev", "/run", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/etc", "/boot"} {
			if p == sys || strings.HasPrefix(p, sys+"/") {
				return Errorf(EInvalid, "volume mount path %q: not under %s", p, sys)
			}
		}
		for _, part := range strings.Split(p, "/") {
			if part == "." || part == ".." {
				return Errorf(EInvalid, "volume mount path %q: no . or .. parts", p)
			}
		}
		if seenVol[m.Volume] {
			return Errorf(EInvalid, "volume %s is listed twice", m.Volume)
		}
		if seenPath[p] {
			return Errorf(EInvalid, "two volumes at %s", p)
		}
		seenVol[m.Volume], seenPath[p] = true, true
	}
	return nil
}
