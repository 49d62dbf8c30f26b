package storetest

import (
	"testing"

	"github.com/pandastack/pandastack"
)

func team(id, name string) pandastack.Team {
	return pandastack.Team{ID: id, Name: name, CreatedAt: at(0)}
}

func apiKey(id, teamID, hash string) pandastack.APIKey {
	return pandastack.APIKey{
		ID:        id,
		TeamID:    teamID,
		Name:      "key " + id,
		Prefix:    "pk_" + id[:min(4, len(id))],
		Hash:      hash,
		CreatedAt: at(1),
	}
}

func (h *harness) teams(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := h.newStore(t)
		want := team("team_1", "Acme Inc.")
		mustNot(t, s.CreateTeam(t.Context(), want), "create team")

		got, err := s.GetTeam(t.Context(), want.ID)
		mustNot(t, err, "get team")
		checkTeam(t, got, want)

		got, err = s.TeamByName(t.Context(), want.Name)
		mustNot(t, err, "team by name")
		checkTeam(t, got, want)
	})

	t.Run("NotFound", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")

		_, err := s.GetTeam(t.Context(), "team_missing")
		wantCode(t, err, pandastack.ENotFound, "GetTeam(missing)")
		_, err = s.TeamByName(t.Context(), "missing")
		wantCode(t, err, pandastack.ENotFound, "TeamByName(missing)")
		// Lookups are exact: the name is not a prefix or case-insensitive match.
		_, err = s.TeamByName(t.Context(), "ACME")
		wantCode(t, err, pandastack.ENotFound, "TeamByName(other case)")
		_, err = s.GetTeam(t.Context(), "team_")
		wantCode(t, err, pandastack.ENotFound, "GetTeam(prefix)")
	})

	t.Run("Conflict", func(t *testing.T) {
		s := h.newStore(t)
		orig := team("team_1", "acme")
		mustNot(t, s.CreateTeam(t.Context(), orig), "create team")

		wantCode(t, s.CreateTeam(t.Context(), team("team_1", "other")), pandastack.EConflict, "duplicate team id")
		wantCode(t, s.CreateTeam(t.Context(), team("team_2", "acme")), pandastack.EConflict, "duplicate team name")

		// The failed creates changed nothing.
		got, err := s.GetTeam(t.Context(), "team_1")
		mustNot(t, err, "get team")
		checkTeam(t, got, orig)
		_, err = s.TeamByName(t.Context(), "other")
		wantCode(t, err, pandastack.ENotFound, "name of rejected team")
		_, err = s.GetTeam(t.Context(), "team_2")
		wantCode(t, err, pandastack.ENotFound, "id of rejected team")
	})

	t.Run("EmptyKey", func(t *testing.T) {
		s := h.newStore(t)
		wantCode(t, s.CreateTeam(t.Context(), team("", "acme")), pandastack.EInvalid, "empty team id")
		wantCode(t, s.CreateTeam(t.Context(), team("team_1", "")), pandastack.EInvalid, "empty team name")
	})
}

func (h *harness) apiKeys(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		admin := apiKey("key_admin", "team_1", "hash-admin")
		admin.Admin = true
		user := apiKey("key_user", "team_1", "hash-user")
		for _, k := range []pandastack.APIKey{admin, user} {
			mustNot(t, s.CreateAPIKey(t.Context(), k), "create api key "+k.ID)
		}
		for _, want := range []pandastack.APIKey{admin, user} {
			got, err := s.APIKeyByHash(t.Context(), want.Hash)
			mustNot(t, err, "api key by hash "+want.Hash)
			checkAPIKey(t, got, want)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		s := h.newStore(t)
		_, err := s.APIKeyByHash(t.Context(), "nope")
		wantCode(t, err, pandastack.ENotFound, "APIKeyByHash on empty store")

		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		mustNot(t, s.CreateAPIKey(t.Context(), apiKey("key_1", "team_1", "hash-1")), "create api key")
		_, err = s.APIKeyByHash(t.Context(), "hash-")
		wantCode(t, err, pandastack.ENotFound, "APIKeyByHash(prefix of a hash)")
		// Hashes are looked up by hash, never by id.
		_, err = s.APIKeyByHash(t.Context(), "key_1")
		wantCode(t, err, pandastack.ENotFound, "APIKeyByHash(an id)")
	})

	t.Run("Conflict", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		orig := apiKey("key_1", "team_1", "hash-1")
		mustNot(t, s.CreateAPIKey(t.Context(), orig), "create api key")

		wantCode(t, s.CreateAPIKey(t.Context(), apiKey("key_1", "team_1", "hash-2")), pandastack.EConflict, "duplicate key id")
		wantCode(t, s.CreateAPIKey(t.Context(), apiKey("key_2", "team_1", "hash-1")), pandastack.EConflict, "duplicate key hash")

		got, err := s.APIKeyByHash(t.Context(), "hash-1")
		mustNot(t, err, "api key by hash")
		checkAPIKey(t, got, orig)
		_, err = s.APIKeyByHash(t.Context(), "hash-2")
		wantCode(t, err, pandastack.ENotFound, "hash of rejected key")
		n, err := s.CountAPIKeys(t.Context())
		mustNot(t, err, "count api keys")
		if n != 1 {
			t.Errorf("CountAPIKeys = %d after rejected duplicates, want 1", n)
		}
	})

	t.Run("UnknownTeam", func(t *testing.T) {
		s := h.newStore(t)
		err := s.CreateAPIKey(t.Context(), apiKey("key_1", "team_missing", "hash-1"))
		wantCode(t, err, pandastack.ENotFound, "api key for a missing team")
		_, err = s.APIKeyByHash(t.Context(), "hash-1")
		wantCode(t, err, pandastack.ENotFound, "hash of rejected key")
	})

	t.Run("Revoked", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		revoked := apiKey("key_old", "team_1", "hash-old")
		revoked.RevokedAt = ptr(at(60))
		active := apiKey("key_new", "team_1", "hash-new")
		mustNot(t, s.CreateAPIKey(t.Context(), revoked), "create revoked key")
		mustNot(t, s.CreateAPIKey(t.Context(), active), "create active key")

		_, err := s.APIKeyByHash(t.Context(), "hash-old")
		wantCode(t, err, pandastack.ENotFound, "APIKeyByHash(revoked)")
		got, err := s.APIKeyByHash(t.Context(), "hash-new")
		mustNot(t, err, "api key by hash (active)")
		checkAPIKey(t, got, active)
	})

	t.Run("Count", func(t *testing.T) {
		s := h.newStore(t)
		count := func(want int) {
			t.Helper()
			n, err := s.CountAPIKeys(t.Context())
			mustNot(t, err, "count api keys")
			if n != want {
				t.Errorf("CountAPIKeys = %d, want %d", n, want)
			}
		}
		count(0)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		mustNot(t, s.CreateTeam(t.Context(), team("team_2", "globex")), "create team")
		count(0)
		mustNot(t, s.CreateAPIKey(t.Context(), apiKey("key_1", "team_1", "hash-1")), "create key")
		count(1)
		mustNot(t, s.CreateAPIKey(t.Context(), apiKey("key_2", "team_2", "hash-2")), "create key")
		count(2)
		// Revoked keys still count: revoking every key must not make the
		// store look like a fresh install.
		k := apiKey("key_3", "team_1", "hash-3")
		k.RevokedAt = ptr(at(5))
		mustNot(t, s.CreateAPIKey(t.Context(), k), "create revoked key")
		count(3)
	})

	t.Run("EmptyKey", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		wantCode(t, s.CreateAPIKey(t.Context(), apiKey("", "team_1", "hash-1")), pandastack.EInvalid, "empty key id")
		wantCode(t, s.CreateAPIKey(t.Context(), apiKey("key_1", "team_1", "")), pandastack.EInvalid, "empty key hash")
	})
}
