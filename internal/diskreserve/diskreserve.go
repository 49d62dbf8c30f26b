// Package diskreserve keeps a reserve of free space on the filesystem that
// holds every VM's files (the server's DATA/cow). Running sandboxes write
// into that filesystem as they go — every fresh page of guest memory and
// every new disk block takes a block of it — so once free space falls to
// the reserve, new allocations (creates, forks, snapshots, hibernations,
// volumes, template builds) are refused with 507 insufficient_storage and
// the reserve is left to the sandboxes already running.
package diskreserve

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cowfs"
)

// Default bounds: the reserve is DefaultPercent of the filesystem or
// DefaultMin, whichever is larger, but never more than MaxDefaultPercent
// of it (a small filesystem would otherwise be all reserve).
const (
	DefaultPercent    = 5
	DefaultMin        = 2 << 30
	MaxDefaultPercent = 25
)

// Spec is a reserve as an operator gives it: a size in bytes or a
// percentage of the filesystem; the zero Spec is the default.
type Spec struct {
	Bytes   int64
	Percent float64
	set     bool
}

// ParseSpec reads a --storage-reserve value: "" or "auto" (the default),
// a percentage ("10%"), or a size in bytes with an optional unit (K, M, G,
// T, as KiB/KB/K alike, powers of 1024): "2GiB", "512M", "0" (no reserve).
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "auto" {
		return Spec{}, nil
	}
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v >= 100 {
			return Spec{}, fmt.Errorf("storage reserve %q: a percentage must be from 0 to below 100", s)
		}
		return Spec{Percent: v, set: true}, nil
	}
	n, err := ParseBytes(s)
	if err != nil {
		return Spec{}, fmt.Errorf("storage reserve: %w", err)
	}
	return Spec{Bytes: n, set: true}, nil
}

// ParseBytes reads a size: a whole number with an optional unit K, M, G or
// T (KiB, KB and K alike are 1024; B alone is bytes).
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			shift = 10
		case 'M':
			shift = 20
		case 'G':
			shift = 30
		case 'T':
			shift = 40
		}
		if shift != 0 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional unit (K, M, G, T), such as 2GiB", s)
	}
	return n << shift, nil
}

// Resolve is the reserve in bytes on a filesystem of total bytes.
func (s Spec) Resolve(total int64) int64 {
	switch {
	case s.set && s.Percent > 0:
		return int64(float64(total) * s.Percent / 100)
	case s.set:
		return s.Bytes
	}
	r := max(total*DefaultPercent/100, DefaultMin)
	return min(r, total*MaxDefaultPercent/100)
}

// String says the spec as ParseSpec reads it.
func (s Spec) String() string {
	switch {
	case !s.set:
		return "auto"
	case s.Percent > 0:
		return strconv.FormatFloat(s.Percent, 'f', -1, 64) + "%"
	}
	return strconv.FormatInt(s.Bytes, 10)
}

// Status is the filesystem's size, its free space and the reserve on it.
type Status struct {
	Dir          string `json:"dir"`
	TotalBytes   int64  `json:"total_bytes"`
	FreeBytes    int64  `json:"free_bytes"`
	ReserveBytes int64  `json:"reserve_bytes"`
}

// Reserve refuses new allocations on dir's filesystem once its free space
// is at or below a reserve. It is safe for concurrent use.
type Reserve struct {
	dir   string
	bytes int64
}

// New returns the reserve spec gives on dir's filesystem.
func New(dir string, spec Spec) (*Reserve, error) {
	total, err := Total(dir)
	if err != nil {
		return nil, err
	}
	return &Reserve{dir: dir, bytes: spec.Resolve(total)}, nil
}

// Bytes is the reserve.
func (r *Reserve) Bytes() int64 { return r.bytes }

// Total returns the size of dir's filesystem (what unprivileged writers
// may use of it).
func Total(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Blocks) * st.Bsize, nil
}

// Status reads the filesystem's size and free space now.
func (r *Reserve) Status() (Status, error) {
	total, err := Total(r.dir)
	if err != nil {
		return Status{}, err
	}
	free, err := cowfs.Free(r.dir)
	if err != nil {
		return Status{}, err
	}
	return Status{Dir: r.dir, TotalBytes: total, FreeBytes: free, ReserveBytes: r.bytes}, nil
}

// Check returns nil while the filesystem has more free space than the
// reserve, else a *pandastack.Error with code insufficient_storage saying
// how much is free (a first answer below the reserve is checked again
// after the filesystem settles: cowfs.FreeFor).
func (r *Reserve) Check(ctx context.Context) error {
	if r.bytes <= 0 {
		return nil
	}
	free, err := cowfs.FreeFor(r.dir, r.bytes+1)
	if err != nil {
		return fmt.Errorf("check the storage reserve: %w", err)
	}
	if free <= r.bytes {
		return &pandastack.Error{Code: pandastack.EInsufficientStorage, Message: fmt.Sprintf(
			"the host's VM storage is at its reserve: %d MiB free, %d MiB kept for running sandboxes; nothing new is allocated until space is freed (delete snapshots, volumes or sandboxes)",
			free>>20, r.bytes>>20)}
	}
	return nil
}
