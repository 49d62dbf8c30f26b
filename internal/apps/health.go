package apps

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

// Health check timing.
const (
	probeTimeout  = 5 * time.Second
	probeInterval = 500 * time.Millisecond
)

// healthy GETs path on port of machine (whose guest is g) until it
// answers 2xx or 3xx, for at most HealthTimeout; failing, it says why,
// with the end of the app's own output in the log. The GET takes the
// path the app's traffic takes (Config.Ports: the machine's NIC where it has
// one), so a release is healthy by the way it will be reached.
func (s *Service) healthy(ctx context.Context, g pandastack.Guest, machine, host string, port int, path string, timeout time.Duration, l *deployLog) error {
	if timeout <= 0 {
		timeout = s.cfg.HealthTimeout
	}
	deadline := time.Now().Add(timeout)
	tries := 0
	for {
		tries++
		err := probe(ctx, s.cfg.Ports.Port(machine, port), host, port, path)
		if err == nil {
			l.printf("health check: GET %s on port %d answered (try %d)", path, port, tries)
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			var out bytes.Buffer
			if rerr := g.ReadFile(context.WithoutCancel(ctx), guestAppLog, &out, nil); rerr == nil && out.Len() > 0 {
				b := out.Bytes()
				if len(b) > 4096 {
					b = b[len(b)-4096:]
				}
				l.printf("the app's output:\n%s", b)
			}
			return fmt.Errorf("health check failed: GET %s on port %d got no 2xx/3xx answer within %s (%d tries): %v", path, port, timeout, tries, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(probeInterval):
		}
	}
}

// probe sends one GET to the app's port through b.
func probe(ctx context.Context, b router.Backend, host string, port int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := b.Dial(ctx)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.ERefused {
			return fmt.Errorf("nothing listens on port %d (does the app listen on $PORT?)", port)
		}
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "pandastack-health-check")
	req.Close = true
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
