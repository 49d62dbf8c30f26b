package apitest

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/store/sqlite"
)

// Store is an in-memory FAKE pandastack.Store for tests. It keeps
// everything in maps behind one mutex and returns copies, except the
// template registry, which is the real SQLite store in memory.
type Store struct {
	pandastack.TemplateStore
	real *sqlite.Store

	mu        sync.Mutex
	teams     map[string]pandastack.Team       // by id
	keys      map[string]pandastack.APIKey     // by hash
	sandboxes map[string]pandastack.Sandbox    // by id
	order     map[string]int                   // sandbox id -> insertion order
	snaps     map[string]pandastack.Snapshot   // by id
	vols      map[string]pandastack.Volume     // by id
	quotas    map[string]pandastack.TeamQuotas // by team id
}

var _ pandastack.Store = (*Store)(nil)

// NewStore returns an empty fake store.
func NewStore() *Store {
	real, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		panic("apitest: open an in-memory SQLite store: " + err.Error())
	}
	return &Store{
		TemplateStore: real,
		real:          real,
		teams:         map[string]pandastack.Team{},
		keys:          map[string]pandastack.APIKey{},
		sandboxes:     map[string]pandastack.Sandbox{},
		order:         map[string]int{},
	}
}

func notFound(format string, args ...any) error {
	return pandastack.Errorf(pandastack.ENotFound, format, args...)
}

func (s *Store) CreateTeam(_ context.Context, t pandastack.Team) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.teams {
		if o.ID == t.ID || o.Name == t.Name {
			return pandastack.Errorf(pandastack.EConflict, "team %s already exists", t.Name)
		}
	}
	s.teams[t.ID] = t
	return nil
}

func (s *Store) GetTeam(_ context.Context, id string) (pandastack.Team, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.teams[id]
	if !ok {
		return t, notFound("team %s not found", id)
	}
	return t, nil
}

func (s *Store) TeamByName(_ context.Context, name string) (pandastack.Team, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.teams {
		if t.Name == name {
			return t, nil
		}
	}
	return pandastack.Team{}, notFound("team %s not found", name)
}

func (s *Store) CreateAPIKey(_ context.Context, k pandastack.APIKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.teams[k.TeamID]; !ok {
		return notFound("team %s not found", k.TeamID)
	}
	for _, o := range s.keys {
		if o.ID == k.ID || o.Hash == k.Hash {
			return pandastack.Errorf(pandastack.EConflict, "API key %s already exists", k.ID)
		}
	}
	s.keys[k.Hash] = k
	return nil
}

func (s *Store) APIKeyByHash(_ context.Context, hash string) (pandastack.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[hash]
	if !ok {
		return k, notFound("API key not found")
	}
	return k, nil
}

func (s *Store) CountAPIKeys(context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.keys), nil
}

// RevokeKey marks the key with the given id revoked (a test helper; the
// Store interface has no such method).
func (s *Store) RevokeKey(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UTC()
	for h, k := range s.keys {
		if k.ID == id {
			k.RevokedAt = &now
			s.keys[h] = k
		}
	}
}

func cloneSandbox(sb pandastack.Sandbox) pandastack.Sandbox {
	sb.Metadata = maps.Clone(sb.Metadata)
	sb.Env = maps.Clone(sb.Env)
	if sb.EndedAt != nil {
		t := *sb.EndedAt
		sb.EndedAt = &t
	}
	return sb
}

func (s *Store) PutSandbox(_ context.Context, sb pandastack.Sandbox) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.order[sb.ID]; !ok {
		s.order[sb.ID] = len(s.order)
	}
	s.sandboxes[sb.ID] = cloneSandbox(sb)
	return nil
}

func (s *Store) GetSandbox(_ context.Context, id string) (pandastack.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	if !ok {
		return sb, notFound("sandbox %s not found", id)
	}
	return cloneSandbox(sb), nil
}

func (s *Store) ListSandboxes(_ context.Context, f pandastack.SandboxFilter) ([]pandastack.Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pandastack.Sandbox
	for _, sb := range s.sandboxes {
		if f.TeamID != "" && sb.TeamID != f.TeamID ||
			f.LiveOnly && !sb.State.Live() ||
			f.Host != "" && sb.Host != f.Host ||
			f.Lifetime != "" && (sb.Lifetime == "" && f.Lifetime != pandastack.LifetimeSandbox || sb.Lifetime != "" && sb.Lifetime != f.Lifetime) {
			continue
		}
		match := true
		for k, v := range f.Metadata {
			if got, ok := sb.Metadata[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			out = append(out, cloneSandbox(sb))
		}
	}
	slices.SortFunc(out, func(a, b pandastack.Sandbox) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return s.order[a.ID] - s.order[b.ID]
	})
	return out, nil
}

func (s *Store) CountLiveSandboxes(_ context.Context, teamID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, sb := range s.sandboxes {
		if sb.TeamID == teamID && sb.State.Live() {
			n++
		}
	}
	return n, nil
}

func (s *Store) Close() error { return s.real.Close() }

func (s *Store) snapshots() map[string]pandastack.Snapshot {
	if s.snaps == nil {
		s.snaps = map[string]pandastack.Snapshot{}
	}
	return s.snaps
}

func (s *Store) CreateSnapshot(_ context.Context, sn pandastack.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.snapshots() {
		if o.TeamID == sn.TeamID && o.Name == sn.Name {
			return pandastack.Errorf(pandastack.EConflict, "a snapshot named %q already exists", sn.Name)
		}
	}
	s.snapshots()[sn.ID] = sn
	return nil
}

func (s *Store) GetSnapshot(_ context.Context, id string) (pandastack.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots()[id]
	if !ok {
		return sn, pandastack.Errorf(pandastack.ENotFound, "snapshot %s not found", id)
	}
	return sn, nil
}

func (s *Store) ListSnapshots(_ context.Context, teamID string) ([]pandastack.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []pandastack.Snapshot{}
	for _, sn := range s.snapshots() {
		if teamID == "" || sn.TeamID == teamID {
			out = append(out, sn)
		}
	}
	return out, nil
}

// SetSnapshotExport records a snapshot's export.
func (s *Store) SetSnapshotExport(_ context.Context, id, objectKey string, exportedAt time.Time, exportErr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.snapshots()[id]
	if !ok {
		return pandastack.Errorf(pandastack.ENotFound, "snapshot %s not found", id)
	}
	sn.ObjectKey, sn.ExportedAt, sn.ExportError = objectKey, exportedAt, exportErr
	s.snapshots()[id] = sn
	return nil
}

func (s *Store) DeleteSnapshot(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.snapshots()[id]; !ok {
		return pandastack.Errorf(pandastack.ENotFound, "snapshot %s not found", id)
	}
	delete(s.snapshots(), id)
	return nil
}

func (s *Store) volumeMap() map[string]pandastack.Volume {
	if s.vols == nil {
		s.vols = map[string]pandastack.Volume{}
	}
	return s.vols
}

func (s *Store) CreateVolume(_ context.Context, v pandastack.Volume) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.volumeMap() {
		if o.ID == v.ID || (o.TeamID == v.TeamID && o.Name == v.Name) {
			return pandastack.Errorf(pandastack.EConflict, "a volume named %q already exists", v.Name)
		}
	}
	s.volumeMap()[v.ID] = v
	return nil
}

func (s *Store) GetVolume(_ context.Context, id string) (pandastack.Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumeMap()[id]
	if !ok {
		return v, notFound("volume %s not found", id)
	}
	return v, nil
}

func (s *Store) VolumeByName(_ context.Context, teamID, name string) (pandastack.Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.volumeMap() {
		if v.TeamID == teamID && v.Name == name {
			return v, nil
		}
	}
	return pandastack.Volume{}, notFound("volume %s not found", name)
}

func (s *Store) ListVolumes(_ context.Context, teamID string) ([]pandastack.Volume, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []pandastack.Volume{}
	for _, v := range s.volumeMap() {
		if teamID == "" || v.TeamID == teamID {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b pandastack.Volume) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (s *Store) DeleteVolume(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumeMap()[id]
	if !ok {
		return notFound("volume %s not found", id)
	}
	if v.SandboxID != "" {
		return pandastack.Errorf(pandastack.EConflict, "volume %s is attached to sandbox %s; kill the sandbox first", v.Name, v.SandboxID)
	}
	delete(s.vols, id)
	return nil
}

func (s *Store) AttachVolume(_ context.Context, id, sandboxID, mountPath string, slot int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumeMap()[id]
	if !ok {
		return notFound("volume %s not found", id)
	}
	if v.SandboxID != "" {
		return pandastack.Errorf(pandastack.EConflict, "volume %s is in use by sandbox %s", v.Name, v.SandboxID)
	}
	v.SandboxID, v.MountPath, v.Slot = sandboxID, mountPath, slot
	s.vols[id] = v
	return nil
}

func (s *Store) MoveVolumes(_ context.Context, from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, v := range s.volumeMap() {
		if from != "" && v.SandboxID == from {
			v.SandboxID = to
			s.vols[id] = v
		}
	}
	return nil
}

func (s *Store) DetachVolumes(_ context.Context, sandboxID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, v := range s.volumeMap() {
		if sandboxID != "" && v.SandboxID == sandboxID {
			v.SandboxID, v.MountPath, v.Slot = "", "", 0
			s.vols[id] = v
		}
	}
	return nil
}
