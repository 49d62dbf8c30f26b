// Package objstoretest is the conformance suite every object store backend
// runs (as litestream runs one suite over every ReplicaClient): what
// objstore.Store promises, checked against the real backend.
package objstoretest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore"
)

// Run runs the suite. newStore returns an empty store each time it is
// called; it cleans up after itself (t.Cleanup).
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store)
	}{
		{"PutGetStat", testPutGetStat},
		{"EmptyObject", testEmpty},
		{"NotFound", testNotFound},
		{"Overwrite", testOverwrite},
		{"DeleteAndDeleteMissing", testDelete},
		{"ListByPrefixManyKeys", testList},
		{"OddKeys", testOddKeys},
		{"InvalidKeys", testInvalidKeys},
		{"LargeObjectIsStreamed", testLarge},
		{"FailedPutLeavesOldObject", testFailedPut},
		{"CancelledPutStoresNothing", testCancelPut},
		{"CancelledGetStopsReading", testCancelGet},
		{"ConcurrentPutsOneWins", testConcurrentPuts},
		{"PresignedGet", testPresign},
		{"Check", func(t *testing.T, s objstore.Store) {
			if err := s.Check(context.Background()); err != nil {
				t.Fatalf("Check: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

func put(t *testing.T, s objstore.Store, key, body string) {
	t.Helper()
	if err := s.Put(context.Background(), key, strings.NewReader(body)); err != nil {
		t.Fatalf("Put %q: %v", key, err)
	}
}

func get(t *testing.T, s objstore.Store, key string) string {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get %q: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return string(b)
}

func keys(t *testing.T, s objstore.Store, prefix string) []string {
	t.Helper()
	list, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List %q: %v", prefix, err)
	}
	out := []string{}
	for _, o := range list {
		out = append(out, o.Key)
	}
	return out
}

func testPutGetStat(t *testing.T, s objstore.Store) {
	put(t, s, "dir/obj", "hello object")
	if got := get(t, s, "dir/obj"); got != "hello object" {
		t.Fatalf("Get = %q", got)
	}
	info, err := s.Stat(context.Background(), "dir/obj")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "dir/obj" || info.Size != int64(len("hello object")) {
		t.Fatalf("Stat = %+v", info)
	}
	if info.ModTime.IsZero() || time.Since(info.ModTime) > 24*time.Hour {
		t.Fatalf("Stat mod time %v", info.ModTime)
	}
}

func testEmpty(t *testing.T, s objstore.Store) {
	put(t, s, "empty", "")
	if got := get(t, s, "empty"); got != "" {
		t.Fatalf("Get = %q", got)
	}
	if info, err := s.Stat(context.Background(), "empty"); err != nil || info.Size != 0 {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
}

func testNotFound(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "a/present", "x")
	for _, key := range []string{"missing", "a/missing", "a", "a/present/below"} {
		_, err := s.Get(ctx, key)
		if !objstore.IsNotFound(err) {
			t.Errorf("Get %q: %v, want ErrNotFound", key, err)
		}
		if pandastack.ErrorCode(err) != pandastack.ENotFound {
			t.Errorf("Get %q: code %q, want %q", key, pandastack.ErrorCode(err), pandastack.ENotFound)
		}
		if _, err := s.Stat(ctx, key); !objstore.IsNotFound(err) {
			t.Errorf("Stat %q: %v, want ErrNotFound", key, err)
		}
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	put(t, s, "k", "a long first version of the object")
	put(t, s, "k", "short")
	if got := get(t, s, "k"); got != "short" {
		t.Fatalf("after overwrite Get = %q", got)
	}
	if got := keys(t, s, ""); len(got) != 1 || got[0] != "k" {
		t.Fatalf("List = %q, want one key", got)
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "d/one", "1")
	put(t, s, "d/two", "2")
	if err := s.Delete(ctx, "d/one"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "d/one"); !objstore.IsNotFound(err) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := s.Delete(ctx, "d/one"); err != nil {
		t.Fatalf("Delete of a deleted object: %v", err)
	}
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("Delete of a missing object: %v", err)
	}
	if got := keys(t, s, ""); len(got) != 1 || got[0] != "d/two" {
		t.Fatalf("List = %q", got)
	}
	if err := s.Delete(ctx, "d/two"); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List after deleting all = %q", got)
	}
	// A key under a deleted one's former directory works again.
	put(t, s, "d/three", "3")
	if got := get(t, s, "d/three"); got != "3" {
		t.Fatalf("Get = %q", got)
	}
}

// ManyKeys is how many keys the listing test writes: over one page of a
// backend whose tests set a small page size.
const ManyKeys = 230

func testList(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	var want []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, ManyKeys)
	sem := make(chan struct{}, 8)
	for i := range ManyKeys {
		key := fmt.Sprintf("snap/%03d/part", i)
		want = append(want, key)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.Put(ctx, key, strings.NewReader(key)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	put(t, s, "snapshot-other", "x")
	put(t, s, "sn", "x")
	put(t, s, "zzz/last", "x")
	sort.Strings(want)

	got := keys(t, s, "snap/")
	if !equal(got, want) {
		t.Fatalf("List snap/: %d keys %q…, want %d", len(got), head(got), len(want))
	}
	if got := keys(t, s, "snap/1"); len(got) != 100 || got[0] != "snap/100/part" || got[99] != "snap/199/part" {
		t.Fatalf("List snap/1 (a partial segment): %d keys %q…", len(got), head(got))
	}
	if got := keys(t, s, "snap"); len(got) != ManyKeys+1 || got[ManyKeys] != "snapshot-other" {
		t.Fatalf("List snap: %d keys, last %q", len(got), got[len(got)-1])
	}
	if got := keys(t, s, "nothing/"); len(got) != 0 {
		t.Fatalf("List nothing/ = %q", got)
	}
	all := keys(t, s, "")
	if len(all) != ManyKeys+3 || all[0] != "sn" || all[len(all)-1] != "zzz/last" {
		t.Fatalf("List all: %d keys, first %q", len(all), head(all))
	}
	list, _ := s.List(ctx, "snap/007/")
	if len(list) != 1 || list[0].Size != int64(len("snap/007/part")) {
		t.Fatalf("List snap/007/ = %+v", list)
	}
}

func head(s []string) []string {
	if len(s) > 3 {
		return s[:3]
	}
	return s
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// OddKeys are keys with characters that need escaping somewhere (URLs,
// XML, shells, file names); every backend stores and lists them as given.
var OddKeys = []string{
	"with space/and more spaces",
	"plus+sign/percent%20literal",
	"query?x=1&y=2#frag",
	"unicode/über/日本語/🙂",
	"punct/~!$'()*,;:@[]{}",
	"back\\slash",
	"dots/.hidden/..double.dots",
}

func testOddKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, k := range OddKeys {
		put(t, s, k, "body of "+k)
	}
	want := append([]string(nil), OddKeys...)
	sort.Strings(want)
	if got := keys(t, s, ""); !equal(got, want) {
		t.Fatalf("List = %q, want %q", got, want)
	}
	for _, k := range OddKeys {
		if got := get(t, s, k); got != "body of "+k {
			t.Errorf("Get %q = %q", k, got)
		}
		if got := keys(t, s, k); len(got) != 1 || got[0] != k {
			t.Errorf("List %q = %q", k, got)
		}
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("Delete %q: %v", k, err)
		}
	}
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List after deletes = %q", got)
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, k := range []string{"", "/abs", "trailing/", "a//b", "../escape", "a/../../b", "a/./b", ".", "nul\x00", "ctl\nline", strings.Repeat("k", objstore.MaxKeyLen+1)} {
		if err := s.Put(ctx, k, strings.NewReader("x")); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put %q: %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get %q: %v, want ErrInvalidKey", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Delete %q: %v, want ErrInvalidKey", k, err)
		}
	}
	if got := keys(t, s, ""); len(got) != 0 {
		t.Fatalf("List after invalid puts = %q", got)
	}
}
