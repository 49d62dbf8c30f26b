// Package objstoretest is the conformance suite every object store backend
// runs (as litestream runs one suite over every ReplicaClient): what
// objstore.Store promises, checked against the real backend.
package objstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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

// LargeSize is the large object's size: bigger than any backend's part
// or buffer, so a store that held it whole in memory shows it.
const LargeSize = 96 << 20

// pattern is a deterministic stream of n pseudo-random bytes, generated as
// it is read (nothing is held).
type pattern struct {
	rng *rand.ChaCha8
	n   int64
}

func newPattern(seed byte, n int64) *pattern {
	var s [32]byte
	s[0] = seed
	return &pattern{rng: rand.NewChaCha8(s), n: n}
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n {
		b = b[:p.n]
	}
	n, _ := p.rng.Read(b)
	p.n -= int64(n)
	return n, nil
}

func sum(r io.Reader) ([32]byte, int64, error) {
	h := sha256.New()
	n, err := io.Copy(h, r)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out, n, err
}

// heapWatch samples the heap while fn runs and returns its peak growth.
func heapWatch(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	fn()
	close(stop)
	<-done
	return peak.Load()
}

func testLarge(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	want, _, _ := sum(newPattern(7, LargeSize))
	var err error
	grew := heapWatch(func() { err = s.Put(ctx, "big/object", newPattern(7, LargeSize)) })
	if err != nil {
		t.Fatalf("Put %d MiB: %v", LargeSize>>20, err)
	}
	if grew > LargeSize/2 {
		t.Errorf("Put of %d MiB grew the heap by %d MiB: the object was buffered", LargeSize>>20, grew>>20)
	}
	info, err := s.Stat(ctx, "big/object")
	if err != nil || info.Size != LargeSize {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	var got [32]byte
	var n int64
	grew = heapWatch(func() {
		rc, gerr := s.Get(ctx, "big/object")
		if gerr != nil {
			err = gerr
			return
		}
		defer rc.Close()
		got, n, err = sum(rc)
	})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if n != LargeSize || got != want {
		t.Fatalf("Get returned %d bytes, sha256 %x, want %d bytes %x", n, got, LargeSize, want)
	}
	if grew > LargeSize/2 {
		t.Errorf("Get of %d MiB grew the heap by %d MiB: the object was buffered", LargeSize>>20, grew>>20)
	}
}

// failingReader yields n bytes, then fails.
type failingReader struct{ n int }

var errBroken = errors.New("source broke")

func (f *failingReader) Read(b []byte) (int, error) {
	if f.n <= 0 {
		return 0, errBroken
	}
	if len(b) > f.n {
		b = b[:f.n]
	}
	for i := range b {
		b[i] = 'x'
	}
	f.n -= len(b)
	return len(b), nil
}

func testFailedPut(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "k", "the old bytes")
	// Small and large (multipart) failures alike.
	for _, n := range []int{10, 20 << 20} {
		if err := s.Put(ctx, "k", &failingReader{n: n}); err == nil {
			t.Fatalf("Put from a failing source (%d bytes) succeeded", n)
		}
		if got := get(t, s, "k"); got != "the old bytes" {
			t.Fatalf("after a failed Put of %d bytes Get = %.40q", n, got)
		}
		if err := s.Put(ctx, "new", &failingReader{n: n}); err == nil {
			t.Fatal("Put from a failing source succeeded")
		}
		if _, err := s.Stat(ctx, "new"); !objstore.IsNotFound(err) {
			t.Fatalf("a failed Put left an object: %v", err)
		}
	}
	if got := keys(t, s, ""); !equal(got, []string{"k"}) {
		t.Fatalf("List = %q", got)
	}
}

// cancelAfter cancels its context once n bytes were read.
type cancelAfter struct {
	r      io.Reader
	n      int64
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n -= int64(n)
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

func testCancelPut(t *testing.T, s objstore.Store) {
	for _, size := range []int64{1 << 10, 40 << 20} {
		ctx, cancel := context.WithCancel(context.Background())
		src := &cancelAfter{r: newPattern(1, size), n: size / 2, cancel: cancel}
		err := s.Put(ctx, "cancelled", src)
		cancel()
		if err == nil {
			// A small body may be sent whole before the cancel is seen;
			// then it must be stored whole.
			if size > 1<<20 {
				t.Fatalf("Put of %d bytes cancelled half way succeeded", size)
			}
			if info, err := s.Stat(context.Background(), "cancelled"); err != nil || info.Size != size {
				t.Fatalf("Stat = %+v, %v", info, err)
			}
			continue
		}
		if !errors.Is(err, context.Canceled) {
			t.Logf("cancelled Put: %v (not context.Canceled)", err)
		}
		if _, err := s.Stat(context.Background(), "cancelled"); !objstore.IsNotFound(err) {
			t.Fatalf("a cancelled Put of %d bytes left an object: %v", size, err)
		}
	}
	if _, err := s.Get(canceled(), "cancelled"); err == nil {
		t.Fatal("Get with a cancelled context succeeded")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func testCancelGet(t *testing.T, s objstore.Store) {
	const size = 32 << 20
	if err := s.Put(context.Background(), "obj", newPattern(3, size)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc, err := s.Get(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.CopyN(io.Discard, rc, 1<<20); err != nil {
		t.Fatal(err)
	}
	cancel()
	n, err := io.Copy(io.Discard, rc)
	if err == nil {
		t.Fatalf("reading after cancel went on to the end (%d more bytes) without an error", n)
	}
}

func testConcurrentPuts(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	bodies := []string{strings.Repeat("a", 3<<20), strings.Repeat("b", 2<<20), strings.Repeat("c", 1<<20)}
	var wg sync.WaitGroup
	for _, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put(ctx, "contended", strings.NewReader(b)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := get(t, s, "contended")
	for _, b := range bodies {
		if got == b {
			return
		}
	}
	t.Fatalf("after concurrent Puts the object is none of them whole (%d bytes)", len(got))
}

func testPresign(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	body := "presigned body: " + OddKeys[0]
	put(t, s, "pre/signed obj+1", body)
	u, err := s.PresignGet(ctx, "pre/signed obj+1", time.Minute)
	if errors.Is(err, objstore.ErrNotSupported) {
		t.Skipf("backend %s has no presigned URLs", s)
	}
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u) // plain net/http, no credentials
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(b, []byte(body)) {
		t.Fatalf("GET presigned URL: %d %q", resp.StatusCode, b)
	}
	// The URL names one object: changing its key breaks the signature.
	resp, err = http.Get(strings.Replace(u, "signed", "signef", 1))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatal("a presigned URL with another key answered 200")
	}
}
