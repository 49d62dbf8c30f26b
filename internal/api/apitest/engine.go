package apitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
)

// Engine is a FAKE pandastack.Engine for tests: "creating" a sandbox makes a
// record in the Store and a fake Guest (an in-memory file system and a toy
// command interpreter, see Guest). No VM, no isolation, nothing runs.
// Like the real engine, it persists every state change in the Store.
type Engine struct {
	Store *Store
	// AccelValue is what Accel reports (default tcg).
	AccelValue pandastack.Accel
	// CreateErr, when set, is returned by Create (to test error mapping).
	CreateErr error
	// VolumeErr, when set, is returned by CreateVolume.
	VolumeErr error

	mu     sync.Mutex
	guests map[string]*Guest
	// created holds every CreateRequest received, for assertions.
	created []pandastack.CreateRequest
}

var _ pandastack.Engine = (*Engine)(nil)

// NewEngine returns a fake engine persisting into store.
func NewEngine(store *Store) *Engine {
	return &Engine{Store: store, AccelValue: pandastack.AccelTCG, guests: map[string]*Guest{}}
}

func (e *Engine) Accel() pandastack.Accel { return e.AccelValue }

func randomID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (e *Engine) Create(ctx context.Context, req pandastack.CreateRequest) (pandastack.Sandbox, error) {
	e.mu.Lock()
	e.created = append(e.created, req)
	e.mu.Unlock()
	if e.CreateErr != nil {
		return pandastack.Sandbox{}, e.CreateErr
	}
	name := req.Template
	if req.Snapshot != "" { // made from a snapshot: its template
		sn, err := e.Store.GetSnapshot(ctx, req.Snapshot)
		if err != nil || sn.TeamID != req.TeamID {
			return pandastack.Sandbox{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %q not found", req.Snapshot)
		}
		name = sn.Template
	}
	// The API resolved a team's reference to "name@ID"; the fake finds
	// that build like a host would, by name and build alone.
	name, id, _ := strings.Cut(name, "@")
	t, err := e.Store.GetTemplate(ctx, req.TeamID, name)
	if err != nil {
		t, err = e.Store.GetTemplate(ctx, "", name)
	}
	if err != nil {
		return pandastack.Sandbox{}, pandastack.Errorf(pandastack.ENotFound, "template %q not found", name)
	}
	if id != "" {
		t.ID = id
	}
	if req.TemplateVersion > 0 {
		t.Version = req.TemplateVersion
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	sb := pandastack.Sandbox{
		ID:         randomID("sb_"),
		TeamID:     req.TeamID,
		Template:   t.Name,
		TemplateID: t.ID,
		State:      pandastack.StateRunning,
		Host:       "fake-host",
		Accel:      e.AccelValue,
		Metadata:   maps.Clone(req.Metadata),
		Env:        maps.Clone(req.Env),
		CPUs:       t.CPUs,
		MemoryMiB:  t.MemoryMiB,

		TemplateVersion: t.Version,
		CreatedAt:       now,
		ExpiresAt:       req.Lifetime.Expiry(now, req.TTL),
		Lifetime:        req.Lifetime,

		AutoHibernateSeconds: int(req.AutoHibernate / time.Second),
		OnExpiry:             req.OnExpiry,
	}
	if err := e.Store.PutSandbox(ctx, sb); err != nil {
		return pandastack.Sandbox{}, err
	}
	g := NewGuest()
	g.env = maps.Clone(req.Env)
	e.mu.Lock()
	e.guests[sb.ID] = g
	e.mu.Unlock()
	return sb, nil
}

// Created returns the CreateRequests the engine has received.
func (e *Engine) Created() []pandastack.CreateRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]pandastack.CreateRequest(nil), e.created...)
}

// GuestOf returns the fake guest of a sandbox (nil if unknown), for tests
// that seed files or install an ExecHook.
func (e *Engine) GuestOf(id string) *Guest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.guests[id]
}

func (e *Engine) Guest(ctx context.Context, id string) (pandastack.Guest, error) {
	sb, err := e.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sb.State.Live() {
		return nil, pandastack.Errorf(pandastack.EGone, "sandbox %s is %s", id, sb.State)
	}
	g := e.GuestOf(id)
	if g == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "sandbox %s has no guest", id)
	}
	return g, nil
}

func (e *Engine) Kill(ctx context.Context, id string, reason pandastack.SandboxState) error {
	sb, err := e.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if !sb.State.Live() {
		return pandastack.Errorf(pandastack.EGone, "sandbox %s is %s", id, sb.State)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	sb.State, sb.EndedAt, sb.EndReason = reason, &now, string(reason)
	if err := e.Store.PutSandbox(ctx, sb); err != nil {
		return err
	}
	if g := e.GuestOf(id); g != nil {
		g.shutdown()
	}
	return nil
}

// Expire ends a sandbox as if its TTL ran out.
func (e *Engine) Expire(ctx context.Context, id string) error {
	return e.Kill(ctx, id, pandastack.StateExpired)
}

func (e *Engine) SetTTL(ctx context.Context, id string, ttl time.Duration) (pandastack.Sandbox, error) {
	sb, err := e.Store.GetSandbox(ctx, id)
	if err != nil {
		return sb, err
	}
	if !sb.State.Live() {
		return sb, pandastack.Errorf(pandastack.EGone, "sandbox %s is %s", id, sb.State)
	}
	if sb.Lifetime.IsService() {
		return sb, pandastack.NoTTLError(id)
	}
	sb.ExpiresAt = time.Now().UTC().Truncate(time.Millisecond).Add(ttl)
	return sb, e.Store.PutSandbox(ctx, sb)
}

// Hibernate flips the state (the fake has no VM to save).
func (e *Engine) Hibernate(ctx context.Context, id string) (pandastack.Sandbox, error) {
	return e.setState(ctx, id, pandastack.StateHibernated)
}

// Wake flips the state back.
func (e *Engine) Wake(ctx context.Context, id string) (pandastack.Sandbox, error) {
	return e.setState(ctx, id, pandastack.StateRunning)
}

func (e *Engine) setState(ctx context.Context, id string, st pandastack.SandboxState) (pandastack.Sandbox, error) {
	sb, err := e.Store.GetSandbox(ctx, id)
	if err != nil {
		return sb, err
	}
	if !sb.State.Live() {
		return sb, pandastack.Errorf(pandastack.EGone, "sandbox %s is %s", id, sb.State)
	}
	sb.State = st
	return sb, e.Store.PutSandbox(ctx, sb)
}

// Fork copies the sandbox's record (the fake has no VM to fork).
func (e *Engine) Fork(ctx context.Context, id string, count int) ([]pandastack.Sandbox, error) {
	sb, err := e.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sb.State.Live() {
		return nil, pandastack.Errorf(pandastack.EGone, "sandbox %s is %s", id, sb.State)
	}
	var out []pandastack.Sandbox
	for i := 0; i < count; i++ {
		kid, err := e.Create(ctx, pandastack.CreateRequest{TeamID: sb.TeamID, Template: sb.Template, TTL: time.Minute, Metadata: map[string]string{"forked_from": id}, Lifetime: sb.Lifetime})
		if err != nil {
			return out, err
		}
		out = append(out, kid)
	}
	return out, nil
}

// Snapshot records a snapshot (the fake has no VM to save).
func (e *Engine) Snapshot(ctx context.Context, id, name string) (pandastack.Snapshot, error) {
	sb, err := e.Store.GetSandbox(ctx, id)
	if err != nil {
		return pandastack.Snapshot{}, err
	}
	if name == "" {
		name = randomID("snap-")
	}
	sn := pandastack.Snapshot{ID: randomID("snap_"), TeamID: sb.TeamID, Name: name, SandboxID: id, Template: sb.Template,
		TemplateID: sb.TemplateID, Host: "fake-host", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	return sn, e.Store.CreateSnapshot(ctx, sn)
}

// DeleteSnapshot removes the record.
func (e *Engine) DeleteSnapshot(ctx context.Context, id string) error {
	return e.Store.DeleteSnapshot(ctx, id)
}

// CreateVolume records a volume (the fake keeps no file).
func (e *Engine) CreateVolume(ctx context.Context, teamID, name string, sizeMiB int) (pandastack.Volume, error) {
	if e.VolumeErr != nil {
		return pandastack.Volume{}, e.VolumeErr
	}
	v := pandastack.Volume{ID: randomID("vol_"), TeamID: teamID, Name: name, SizeMiB: sizeMiB, Host: "fake-host",
		CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	return v, e.Store.CreateVolume(ctx, v)
}

// DeleteVolume removes the record.
func (e *Engine) DeleteVolume(ctx context.Context, id string) error {
	return e.Store.DeleteVolume(ctx, id)
}
