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
	conn, err := dialShim(t.Context(), g)
	if err != nil {
		t.Fatalf("dial after 3 refusals: %v", err)
	}
	conn.Close()
	if g.dials != 4 {
		t.Fatalf("dialled %d times, want 4", g.dials)
	}
}

func TestDialShimStopsAtTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := dialShim(ctx, &refusingGuest{n: 1 << 30})
	if pandastack.ErrorCode(err) != pandastack.ERefused || ctx.Err() == nil {
		t.Fatalf("dial refused until the deadline: %v, want the refusal once the deadline passed", err)
	}
}
