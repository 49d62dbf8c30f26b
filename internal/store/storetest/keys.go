package storetest

import (
	"testing"

	"github.com/pandastack/pandastack"
)

// apiKeyAdmin tests what key listing, revocation and rotation rely on.
func (h *harness) apiKeyAdmin(t *testing.T) {
	t.Run("GetAndList", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		mustNot(t, s.CreateTeam(t.Context(), team("team_2", "globex")), "create team")
		k1 := apiKey("key_1", "team_1", "hash-1")
		k2 := apiKey("key_2", "team_2", "hash-2")
		k2.CreatedAt = at(2)
		k3 := apiKey("key_3", "team_1", "hash-3")
		k3.CreatedAt = at(3)
		k3.RevokedAt = ptr(at(4))
		for _, k := range []pandastack.APIKey{k3, k1, k2} {
			mustNot(t, s.CreateAPIKey(t.Context(), k), "create "+k.ID)
		}
		got, err := s.GetAPIKey(t.Context(), "key_3")
		mustNot(t, err, "get revoked key")
		checkAPIKey(t, got, k3)
		_, err = s.GetAPIKey(t.Context(), "key_missing")
		wantCode(t, err, pandastack.ENotFound, "GetAPIKey(missing)")
		_, err = s.GetAPIKey(t.Context(), "hash-1")
		wantCode(t, err, pandastack.ENotFound, "GetAPIKey(a hash)")

		list, err := s.ListAPIKeys(t.Context(), "team_1")
		mustNot(t, err, "list team_1's keys")
		if len(list) != 2 {
			t.Fatalf("team_1 lists %d keys, want 2 (revoked included): %+v", len(list), list)
		}
		checkAPIKey(t, list[0], k1) // oldest first
		checkAPIKey(t, list[1], k3)

		all, err := s.ListAPIKeys(t.Context(), "")
		mustNot(t, err, "list every key")
		var gotIDs []string
		for _, k := range all {
			gotIDs = append(gotIDs, k.ID)
		}
		if len(gotIDs) != 3 || gotIDs[0] != "key_1" || gotIDs[1] != "key_2" || gotIDs[2] != "key_3" {
			t.Errorf("ListAPIKeys(\"\") = %v, want [key_1 key_2 key_3]", gotIDs)
		}
		none, err := s.ListAPIKeys(t.Context(), "team_missing")
		mustNot(t, err, "list a missing team's keys")
		if len(none) != 0 {
			t.Errorf("missing team lists %d keys", len(none))
		}
	})

	t.Run("Revoke", func(t *testing.T) {
		s := h.newStore(t)
		mustNot(t, s.CreateTeam(t.Context(), team("team_1", "acme")), "create team")
		k := apiKey("key_1", "team_1", "hash-1")
		other := apiKey("key_2", "team_1", "hash-2")
		mustNot(t, s.CreateAPIKey(t.Context(), k), "create key")
		mustNot(t, s.CreateAPIKey(t.Context(), other), "create key")

		got, err := s.RevokeAPIKey(t.Context(), "key_1", at(100))
		mustNot(t, err, "revoke")
		k.RevokedAt = ptr(at(100))
		checkAPIKey(t, got, k)
		// At once, a revoked key no longer authenticates.
		_, err = s.APIKeyByHash(t.Context(), "hash-1")
		wantCode(t, err, pandastack.ENotFound, "APIKeyByHash(just revoked)")
		got, err = s.GetAPIKey(t.Context(), "key_1")
		mustNot(t, err, "get revoked key")
		checkAPIKey(t, got, k)

		// Revoking again keeps the first time.
		got, err = s.RevokeAPIKey(t.Context(), "key_1", at(200))
		mustNot(t, err, "revoke again")
		checkAPIKey(t, got, k)

		// The other key is untouched.
		got, err = s.APIKeyByHash(t.Context(), "hash-2")
		mustNot(t, err, "other key")
		checkAPIKey(t, got, other)

		_, err = s.RevokeAPIKey(t.Context(), "key_missing", at(1))
		wantCode(t, err, pandastack.ENotFound, "revoke a missing key")
	})
}
