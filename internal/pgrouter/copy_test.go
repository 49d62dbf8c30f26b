package pgrouter

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// chunks reads its chunks one per Read, as a socket hands over what
// arrived.
type chunks struct{ c [][]byte }

func (r *chunks) Read(p []byte) (int, error) {
	if len(r.c) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.c[0])
	if r.c[0] = r.c[0][n:]; len(r.c[0]) == 0 {
		r.c = r.c[1:]
	}
	return n, nil
}

// TestCopyLean: every byte arrives in order whether reads come small,
// exactly the idle buffer's size, or as a burst larger than the pooled
// buffer; a writer's failure and a reader's are returned, EOF is not.
func TestCopyLean(t *testing.T) {
	big := make([]byte, 3*busyBufSize+17)
	_, _ = rand.Read(big)
	for name, in := range map[string][][]byte{
		"small queries":         {[]byte("Q select 1"), []byte("Q select 2")},
		"exactly the idle size": {big[:idleBufSize], big[idleBufSize : idleBufSize+3]},
		"a burst":               {big},
		"a burst, then small":   {big[:2*busyBufSize], big[2*busyBufSize : 2*busyBufSize+busyBufSize], []byte("tail")},
		"nothing":               {},
	} {
		t.Run(name, func(t *testing.T) {
			var want, got bytes.Buffer
			for _, c := range in {
				want.Write(c)
			}
			cp := make([][]byte, len(in))
			for i, c := range in {
				cp[i] = append([]byte(nil), c...)
			}
			if err := copyLean(&got, &chunks{c: cp}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Fatalf("copied %d bytes, want %d (or they differ)", got.Len(), want.Len())
			}
		})
	}
	boom := errors.New("boom")
	if err := copyLean(io.Discard, iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("reader's error: %v", err)
	}
	if err := copyLean(failWriter{boom}, bytes.NewReader(big)); !errors.Is(err, boom) {
		t.Fatalf("writer's error: %v", err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }
