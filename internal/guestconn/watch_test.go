package guestconn_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// A recursive watch through the real agent reports creates (a directory
// made with its contents whole), writes, renames (a move within the tree),
// removes (a move out of it too), and chmods.
func TestWatchDir(t *testing.T) {
	cl := session(t)
	dir := t.TempDir()
	outside := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := make(chan pandastack.FileEvent, 256)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- cl.WatchDir(ctx, dir, true, func() error { close(started); return nil }, func(ev pandastack.FileEvent) error {
			events <- ev
			return nil
		})
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatal(err)
	}
	want := func(ev pandastack.FileEvent) {
		t.Helper()
		var seen []pandastack.FileEvent
		for {
			select {
			case got := <-events:
				if got == ev {
					return
				}
				seen = append(seen, got)
			case <-time.After(10 * time.Second):
				t.Fatalf("no %+v; saw %+v", ev, seen)
			}
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "a.txt"), []byte("1"), 0o644))
	want(pandastack.FileEvent{Type: "create", Path: "a.txt"})
	want(pandastack.FileEvent{Type: "write", Path: "a.txt"})
	must(os.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755))
	want(pandastack.FileEvent{Type: "create", Path: "sub", IsDir: true})
	want(pandastack.FileEvent{Type: "create", Path: "sub/deep", IsDir: true})
	must(os.WriteFile(filepath.Join(dir, "sub", "deep", "b.txt"), []byte("2"), 0o644))
	want(pandastack.FileEvent{Type: "create", Path: "sub/deep/b.txt"})
	must(os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "sub", "c.txt")))
	want(pandastack.FileEvent{Type: "rename", From: "a.txt", Path: "sub/c.txt"})
	must(os.Rename(filepath.Join(dir, "sub"), filepath.Join(dir, "moved")))
	want(pandastack.FileEvent{Type: "rename", From: "sub", Path: "moved", IsDir: true})
	// The moved directory's watch follows it.
	must(os.WriteFile(filepath.Join(dir, "moved", "deep", "b.txt"), []byte("22"), 0o644))
	want(pandastack.FileEvent{Type: "write", Path: "moved/deep/b.txt"})
	must(os.Chmod(filepath.Join(dir, "moved", "c.txt"), 0o600))
	want(pandastack.FileEvent{Type: "chmod", Path: "moved/c.txt"})
	must(os.Remove(filepath.Join(dir, "moved", "c.txt")))
	want(pandastack.FileEvent{Type: "remove", Path: "moved/c.txt"})
	must(os.Rename(filepath.Join(dir, "moved"), filepath.Join(outside, "gone")))
	want(pandastack.FileEvent{Type: "remove", Path: "moved", IsDir: true})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch after cancel: %v", err)
	}
}

func TestWatchDirErrors(t *testing.T) {
	cl := session(t)
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, code string }{
		{"/no/such/dir", pandastack.ENotFound},
		{file, pandastack.EInvalid},
		{"relative", pandastack.EInvalid},
	} {
		err := cl.WatchDir(ctx, tc.path, false, nil, func(pandastack.FileEvent) error { return nil })
		var pe *pandastack.Error
		if !errors.As(err, &pe) || pe.Code != tc.code {
			t.Errorf("watch %s: %v, want %s", tc.path, err, tc.code)
		}
	}
	// Removing the watched directory ends the watch with not_found.
	dir := t.TempDir()
	errc := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		errc <- cl.WatchDir(ctx, dir, false, func() error { close(started); return nil }, func(pandastack.FileEvent) error { return nil })
	}()
	<-started
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Fatalf("watch of a removed directory: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("watch of %s did not end when it was removed", dir)
	}
}
