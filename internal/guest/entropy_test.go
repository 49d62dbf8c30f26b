package guest

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pandastack/pandastack/internal/guest/guesttest"
	"github.com/pandastack/pandastack/internal/guestproto"
)

func TestReseedKernelRNG(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("RNDRESEEDCRNG needs CAP_SYS_ADMIN (CI runs tests as root)")
	}
	seed := make([]byte, 64)
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	if err := reseed("/dev/urandom", seed); err != nil {
		t.Fatalf("reseed /dev/urandom: %v", err)
	}
}

func TestReseedErrors(t *testing.T) {
	if err := reseed("/dev/urandom", nil); err == nil || !strings.Contains(err.Error(), "no seed") {
		t.Errorf("reseed without a seed: %v, want an error saying there is no seed", err)
	}
	// Not a random device: the forced reseed fails, and says so.
	f := filepath.Join(t.TempDir(), "not-a-device")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reseed(f, []byte("seed")); err == nil || !strings.Contains(err.Error(), "RNDRESEEDCRNG") {
		t.Errorf("reseed of a plain file: %v, want an RNDRESEEDCRNG error", err)
	}
	if err := reseed(filepath.Join(t.TempDir(), "missing"), []byte("seed")); err == nil {
		t.Error("reseed of a missing device succeeded")
	}
}

func TestPublishGeneration(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "pandastack")
	path := filepath.Join(dir, "generation")
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		if err := publishGeneration(path); err != nil {
			t.Fatal(err)
		}
		tok := readToken(t, path)
		if seen[tok] {
			t.Fatalf("generation %q published twice", tok)
		}
		seen[tok] = true
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("generation file mode %v, want 0644 (every user's interpreter reads it)", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries in %s, want only the generation file (no temp files left)", len(ents), dir)
	}
}

// Every Hello — the first after a cold boot, and each one after a restore —
// publishes a new generation before it is answered: once the host has the
// answer, the file already holds the new token.
func TestHelloPublishesGenerationBeforeAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "generation")
	t.Setenv(generationEnv, path)
	conn := guesttest.Serve(t)
	var prev string
	for i, sid := range []string{"s1", "s2", "s3"} {
		hello(t, conn, sid)
		tok := readToken(t, path)
		if tok == prev {
			t.Fatalf("hello %d left the generation at %q", i+1, tok)
		}
		prev = tok
	}
}

// hello greets the agent on conn as session sid and waits for its answer.
func hello(t *testing.T, conn net.Conn, sid string) {
	t.Helper()
	seed := make([]byte, 64)
	_, _ = rand.Read(seed)
	h := guestproto.Hello{Session: sid, UnixNanos: time.Now().UnixNano(), Seed: seed}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer conn.SetDeadline(time.Time{})
	if err := guestproto.WriteFrame(conn, guestproto.FrameHello, h.MarshalBinary()); err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for {
		typ, p, b, err := guestproto.ReadFrame(conn, buf)
		buf = b
		if err != nil {
			t.Fatalf("wait for the answer to hello %s: %v", sid, err)
		}
		if typ != guestproto.FrameHelloAck {
			continue
		}
		ack, err := guestproto.UnmarshalHelloAck(p)
		if err != nil {
			t.Fatal(err)
		}
		if ack.Session == sid {
			return
		}
	}
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read generation: %v", err)
	}
	tok := strings.TrimSuffix(string(b), "\n")
	if raw, err := hex.DecodeString(tok); err != nil || len(raw) != 16 || !strings.HasSuffix(string(b), "\n") {
		t.Fatalf("generation file holds %q, want 32 hex digits and a newline", b)
	}
	return tok
}
