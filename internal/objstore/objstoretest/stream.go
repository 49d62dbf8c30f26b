package objstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/objstore"
)

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
