package diskreserve_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/diskreserve"
)

func TestParseSpec(t *testing.T) {
	const total = 100 << 30
	tests := []struct {
		in   string
		want int64 // the reserve on a 100 GiB filesystem
	}{
		{"", 5 << 30},     // default: 5 %
		{"auto", 5 << 30}, // the same
		{"10%", 10 << 30},
		{"0", 0},
		{"0%", 0},
		{"2GiB", 2 << 30},
		{"512M", 512 << 20},
		{"1T", 1 << 40},
		{"4096", 4096},
		{"3 GB", 3 << 30},
	}
	for _, tt := range tests {
		s, err := diskreserve.ParseSpec(tt.in)
		if err != nil {
			t.Fatalf("ParseSpec(%q): %v", tt.in, err)
		}
		if got := s.Resolve(total); got != tt.want {
			t.Errorf("ParseSpec(%q).Resolve(100 GiB) = %d, want %d", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"-1", "100%", "x%", "2X", "1.5G", "GiB"} {
		if _, err := diskreserve.ParseSpec(bad); err == nil {
			t.Errorf("ParseSpec(%q) accepted", bad)
		}
	}
	// The default on smaller filesystems: at least 2 GiB, at most a quarter.
	var def diskreserve.Spec
	if got := def.Resolve(20 << 30); got != 2<<30 {
		t.Errorf("default on 20 GiB = %d, want 2 GiB", got)
	}
	if got := def.Resolve(4 << 30); got != 1<<30 {
		t.Errorf("default on 4 GiB = %d, want 1 GiB (a quarter)", got)
	}
}

// smallFS mounts a tmpfs of size bytes for the test and unmounts it after.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+strconv.FormatInt(size, 10)); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill preallocates a file of n bytes in dir.
func fill(t *testing.T, dir string, n int64) string {
	t.Helper()
	p := filepath.Join(dir, "fill")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		t.Fatalf("fallocate %d: %v", n, err)
	}
	return p
}

// Above the reserve a new allocation may start; at or below it Check is
// 507 insufficient_storage saying how much is free and how much is kept;
// once space is freed it may start again.
func TestCheckBelowReserve(t *testing.T) {
	dir := smallFS(t, 64<<20)
	spec, err := diskreserve.ParseSpec("16MiB")
	if err != nil {
		t.Fatal(err)
	}
	r, err := diskreserve.New(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.TotalBytes != 64<<20 || st.ReserveBytes != 16<<20 || st.FreeBytes < 60<<20 || st.Dir != dir {
		t.Fatalf("status of an empty 64 MiB filesystem = %+v", st)
	}
	if err := r.Check(t.Context()); err != nil {
		t.Fatalf("empty filesystem: %v", err)
	}
	p := fill(t, dir, 56<<20)
	err = r.Check(t.Context())
	if pandastack.ErrorCode(err) != pandastack.EInsufficientStorage {
		t.Fatalf("8 MiB free, 16 MiB reserve: Check = %v, want insufficient_storage", err)
	}
	if msg := pandastack.ErrorMessage(err); !strings.Contains(msg, "8 MiB free, 16 MiB kept for running sandboxes") {
		t.Fatalf("message %q does not say what is free and kept", msg)
	}
	// What is below the reserve is still there for running sandboxes.
	f, err := os.OpenFile(filepath.Join(dir, "guest-write"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4<<20)); err != nil {
		t.Fatalf("a running sandbox writes into the reserve: %v", err)
	}
	f.Close()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := r.Check(t.Context()); err != nil {
		t.Fatalf("after freeing space: %v", err)
	}
	// No reserve: never refused.
	none, _ := diskreserve.ParseSpec("0")
	r0, err := diskreserve.New(dir, none)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, dir, 59<<20)
	if err := r0.Check(t.Context()); err != nil {
		t.Fatalf("reserve 0: %v", err)
	}
}
