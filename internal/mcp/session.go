package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// Defaults of a sandbox the session starts by itself.
const (
	defaultTemplate   = "base"
	defaultTTLSeconds = 1800
)

// killTimeout bounds killing the session's sandboxes at shutdown.
const killTimeout = 30 * time.Second

// session is the server's state: the current sandbox the tools work on,
// and every sandbox the session started (forks included), to kill them at
// the end. Methods are safe for concurrent use.
type session struct {
	c      *sdk.Client
	log    *slog.Logger
	apiKey string       // for the routes the SDK lacks (fork)
	http   *http.Client // ditto

	mu      sync.Mutex
	current *sdk.Sandbox
	owned   map[string]*sdk.Sandbox // live sandboxes started by the session, by id
}

func newSession(c *sdk.Client, log *slog.Logger, apiKey string) *session {
	return &session{c: c, log: log, apiKey: apiKey, http: http.DefaultClient, owned: map[string]*sdk.Sandbox{}}
}

// sandbox returns the current sandbox, starting one from the default
// template if there is none; started reports that it did.
func (s *session) sandbox(ctx context.Context) (sb *sdk.Sandbox, started bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		return s.current, false, nil
	}
	sb, err = s.createLocked(ctx, sdk.CreateSandboxParams{Template: defaultTemplate, TTLSeconds: defaultTTLSeconds})
	if err != nil {
		return nil, false, fmt.Errorf("could not start a sandbox from template %q: %w", defaultTemplate, err)
	}
	return sb, true, nil
}

// create kills the current sandbox, if any, and starts a new one. killErr
// is the failure to kill the previous one (which does not stop the
// creation).
func (s *session) create(ctx context.Context, p sdk.CreateSandboxParams) (sb *sdk.Sandbox, previous string, killErr, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current != nil {
		previous = s.current.ID
		killErr = s.killLocked(ctx, s.current)
		s.current = nil
	}
	sb, err = s.createLocked(ctx, p)
	return sb, previous, killErr, err
}

func (s *session) createLocked(ctx context.Context, p sdk.CreateSandboxParams) (*sdk.Sandbox, error) {
	sb, err := s.c.CreateSandbox(ctx, p)
	if err != nil {
		return nil, err
	}
	s.log.Info("started sandbox", "id", sb.ID, "template", sb.Template, "accel", sb.Accel)
	s.current = sb
	s.owned[sb.ID] = sb
	return sb, nil
}

// kill kills the current sandbox; id is "" if there was none.
func (s *session) kill(ctx context.Context) (id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == nil {
		return "", nil
	}
	sb := s.current
	s.current = nil
	return sb.ID, s.killLocked(ctx, sb)
}

// killLocked kills sb and forgets it. A sandbox that has already ended
// counts as killed.
func (s *session) killLocked(ctx context.Context, sb *sdk.Sandbox) error {
	delete(s.owned, sb.ID)
	err := sb.Kill(ctx)
	if err != nil && !sdk.IsGone(err) && !sdk.IsNotFound(err) {
		s.log.Warn("kill sandbox", "id", sb.ID, "err", err)
		return err
	}
	s.log.Info("killed sandbox", "id", sb.ID)
	return nil
}

// forget drops sb as the current sandbox if it still is (after the server
// said it has ended), so that the next tool starts a fresh one.
func (s *session) forget(sb *sdk.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current == sb {
		s.current = nil
	}
	delete(s.owned, sb.ID)
}

// selectSandbox makes a sandbox the session started (e.g. a fork) the
// current one.
func (s *session) selectSandbox(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.owned[id]
	if !ok {
		return fmt.Errorf("sandbox %s was not started by this session", id)
	}
	s.current = sb
	return nil
}

// fork forks the current sandbox (starting one if there is none) and
// records the child as the session's, so that it is killed at the end and
// can be selected. With use, the child becomes the current sandbox.
func (s *session) fork(ctx context.Context, use bool) (parent, child *sdk.Sandbox, err error) {
	parent, _, err = s.sandbox(ctx)
	if err != nil {
		return nil, nil, err
	}
	child, err = s.forkSandbox(ctx, parent)
	if err != nil {
		return parent, nil, err
	}
	s.mu.Lock()
	s.owned[child.ID] = child
	s.mu.Unlock()
	s.log.Info("forked sandbox", "parent", parent.ID, "child", child.ID)
	if use {
		err = s.selectSandbox(child.ID)
	}
	return parent, child, err
}

// forkSandbox makes a copy-on-write child of parent through the SDK.
func (s *session) forkSandbox(ctx context.Context, parent *sdk.Sandbox) (*sdk.Sandbox, error) {
	return parent.Fork(ctx)
}

// apiError turns an error answer into an *sdk.APIError, as the SDK does.
func apiError(resp *http.Response, body []byte) error {
	e := &sdk.APIError{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var wire struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Error.Code != "" {
		e.Code, e.Message = wire.Error.Code, wire.Error.Message
		return e
	}
	e.Code = "http_" + fmt.Sprint(resp.StatusCode)
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, msg)
	return e
}

// close kills every sandbox the session started that is still live. It
// runs at shutdown, so it uses its own deadline rather than a caller's
// (possibly canceled) context.
func (s *session) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, sb := range s.owned {
		if err := s.killLocked(ctx, sb); err != nil {
			errs = append(errs, fmt.Errorf("kill sandbox %s: %w", sb.ID, err))
		}
	}
	s.current = nil
	return errors.Join(errs...)
}
