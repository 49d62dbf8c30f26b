package functions

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
)

// refusingGuest refuses its first n dials (as a guest agent whose connect
// timed out does), then connects; other Guest methods are not used.
type refusingGuest struct {
	pandastack.Guest
	n, dials int
}

func (g *refusingGuest) DialPort(ctx context.Context, port int) (net.Conn, error) {
	g.dials++
	if g.dials <= g.n {
		return nil, pandastack.Errorf(pandastack.ERefused, "nothing accepts connections on port %d in the sandbox", port)
	}
	c, _ := net.Pipe()
	return c, nil
}

func TestDialShimRetriesRefusals(t *testing.T) {
	g := &refusingGuest{n: 3}
	conn, sent, err := dialShim(t.Context(), g, []byte("{}\n"))
	if err != nil {
		t.Fatalf("dial after 3 refusals: %v", err)
	}
	conn.Close()
	if sent {
		t.Fatal("a guest that only dials was said to have been sent the request")
	}
	if g.dials != 4 {
		t.Fatalf("dialled %d times, want 4", g.dials)
	}
}

func TestDialShimStopsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, _, err := dialShim(ctx, &refusingGuest{n: 1 << 30}, nil)
	if pandastack.ErrorCode(err) != pandastack.ERefused || ctx.Err() == nil {
		t.Fatalf("dial refused until the deadline: %v, want the refusal once the deadline passed", err)
	}
}

// sendingGuest is a refusingGuest that sends a request with its dial
// (DialPortSend) and keeps what each dial sent.
type sendingGuest struct {
	refusingGuest
	sent [][]byte
}

func (g *sendingGuest) DialPortSend(ctx context.Context, port int, first []byte) (net.Conn, error) {
	g.sent = append(g.sent, first)
	return g.DialPort(ctx, port)
}

// A guest that can send with the dial gets the request with each dial, a
// refused one's included (it was dropped with the stream); one too large
// to go with a dial is left for the caller to write.
func TestDialShimSendsTheRequestWithTheDial(t *testing.T) {
	g := &sendingGuest{refusingGuest: refusingGuest{n: 1}}
	conn, sent, err := dialShim(t.Context(), g, []byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !sent || len(g.sent) != 2 || string(g.sent[1]) != "{}\n" {
		t.Fatalf("sent %v, dials sent %q: want the request with both dials", sent, g.sent)
	}
	g = &sendingGuest{}
	conn, sent, err = dialShim(t.Context(), g, make([]byte, maxSendWithDial+1))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if sent || len(g.sent) != 0 || g.dials != 1 {
		t.Fatalf("a large request: sent %v, %d sent with dials, %d dials", sent, len(g.sent), g.dials)
	}
}
