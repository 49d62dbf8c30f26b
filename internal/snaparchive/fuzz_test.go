package snaparchive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// sparseStream builds an encoding: size, then (offset, data) records, then
// the end record.
func sparseStream(size uint64, recs ...any) []byte {
	b := append([]byte(sparseMagic), binary.BigEndian.AppendUint64(nil, size)...)
	for i := 0; i+1 < len(recs); i += 2 {
		d := recs[i+1].([]byte)
		b = binary.BigEndian.AppendUint64(b, recs[i].(uint64))
		b = binary.BigEndian.AppendUint64(b, uint64(len(d)))
		b = append(b, d...)
	}
	b = binary.BigEndian.AppendUint64(b, endOffset)
	return binary.BigEndian.AppendUint64(b, 0)
}

// FuzzDecodeSparse decodes arbitrary objects as a snapshot import reads
// them from object storage: anything but one whole encoding is errCorrupt
// (or the host's own error), and a decoded file of modest size encodes
// back to a stream that decodes to the same bytes.
func FuzzDecodeSparse(f *testing.F) {
	f.Add(sparseStream(4096, uint64(0), []byte("hello"), uint64(1000), []byte{1, 2, 3}))
	f.Add(sparseStream(0))
	f.Add(sparseStream(10, uint64(5), []byte("123456")))                       // past the end
	f.Add(sparseStream(100, uint64(50), []byte("b"), uint64(10), []byte("a"))) // out of order
	f.Add(sparseStream(100)[:20])                                              // truncated
	f.Add(append(sparseStream(8, uint64(0), []byte("x")), 0))                  // trailing byte
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) >= 16 && binary.BigEndian.Uint64(in[8:16]) > 1<<20 {
			return // huge sparse files: the same checks, a slow temp filesystem
		}
		p := filepath.Join(dir, "a")
		fa, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
		defer fa.Close()
		size, err := decodeSparse(bytes.NewReader(in), fa)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("decode failed without errCorrupt: %v", err)
			}
			return
		}
		if fi, err := fa.Stat(); err != nil || fi.Size() != size {
			t.Fatalf("decoded file is %v bytes, encoding says %d", fi.Size(), size)
		}
		var enc bytes.Buffer
		if err := encodeSparse(fa, &enc); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		q := filepath.Join(dir, "b")
		fb, err := os.Create(q)
		if err != nil {
			t.Fatal(err)
		}
		defer os.Remove(q)
		defer fb.Close()
		if _, err := decodeSparse(&enc, fb); err != nil {
			t.Fatalf("re-encoded stream does not decode: %v", err)
		}
		a, _ := os.ReadFile(p)
		b, _ := os.ReadFile(q)
		if !bytes.Equal(a, b) {
			t.Fatal("decode, encode, decode changed the file's bytes")
		}
	})
}
