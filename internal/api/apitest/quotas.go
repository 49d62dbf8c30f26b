package apitest

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// GetAPIKey returns the key with that id, revoked or not.
func (s *Store) GetAPIKey(_ context.Context, id string) (pandastack.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.ID == id {
			return k, nil
		}
	}
	return pandastack.APIKey{}, notFound("api key %s not found", id)
}

// ListAPIKeys lists a team's keys (every team's for ""), oldest first.
func (s *Store) ListAPIKeys(_ context.Context, teamID string) ([]pandastack.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pandastack.APIKey
	for _, k := range s.keys {
		if teamID == "" || k.TeamID == teamID {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b pandastack.APIKey) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// RevokeAPIKey marks a key revoked; a revoked key keeps its first time.
func (s *Store) RevokeAPIKey(_ context.Context, id string, at time.Time) (pandastack.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h, k := range s.keys {
		if k.ID == id {
			if k.RevokedAt == nil {
				at = at.UTC()
				k.RevokedAt = &at
				s.keys[h] = k
			}
			return k, nil
		}
	}
	return pandastack.APIKey{}, notFound("api key %s not found", id)
}

// GetTeamQuotas returns a team's stored quota overrides.
func (s *Store) GetTeamQuotas(_ context.Context, teamID string) (pandastack.TeamQuotas, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.quotas[teamID]
	if !ok {
		return pandastack.TeamQuotas{TeamID: teamID}, notFound("team %s has no quota overrides", teamID)
	}
	return q, nil
}

// PutTeamQuotas stores a team's quota overrides.
func (s *Store) PutTeamQuotas(_ context.Context, q pandastack.TeamQuotas) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.teams[q.TeamID]; !ok {
		return notFound("team %s not found", q.TeamID)
	}
	if s.quotas == nil {
		s.quotas = map[string]pandastack.TeamQuotas{}
	}
	s.quotas[q.TeamID] = q
	return nil
}
