package api

import (
	"net/http"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/auth"
)

// principal is who a request acts as: a key and its team.
type principal struct {
	key  pandastack.APIKey
	team pandastack.Team
}

func setPrincipal(r *http.Request, p *principal) {
	if st := stateOf(r); st != nil {
		st.principal = p
	}
}

// caller returns the authenticated principal of a request. Routes that are
// not public always have one; reaching here without one is a bug, and it
// fails closed: a principal of no team would read as every team in the
// store's listings, so it panics (the middleware answers 500).
func caller(r *http.Request) *principal {
	if st := stateOf(r); st != nil && st.principal != nil {
		return st.principal
	}
	panic("api: caller() on a request with no authenticated principal")
}

// bearer extracts the API key from "Authorization: Bearer KEY" or
// "X-API-Key: KEY".
func bearer(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token)
		}
		return ""
	}
	return strings.TrimSpace(r.Header.Get("X-API-Key"))
}

// authenticate finds the key a request presents and its team.
func (s *Server) authenticate(r *http.Request) (*principal, error) {
	secret := bearer(r)
	if secret == "" {
		if r.Header.Get("Authorization") != "" {
			return nil, errInvalidKey
		}
		return nil, errMissingKey
	}
	return s.principalFor(r, secret)
}

// principalFor finds the key secret and its team.
func (s *Server) principalFor(r *http.Request, secret string) (*principal, error) {
	if !auth.LooksLikeKey(secret) {
		return nil, errInvalidKey
	}
	hash := auth.Hash(secret)
	key, err := s.cfg.Store.APIKeyByHash(r.Context(), hash)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return nil, errInvalidKey
	}
	if err != nil {
		return nil, wrap(err, "look up API key")
	}
	// The store found the key by its hash; compare again in constant time
	// so a store that matched loosely cannot let a wrong key through.
	if !auth.Matches(secret, key.Hash) || key.RevokedAt != nil {
		return nil, errInvalidKey
	}
	t, err := s.cfg.Store.GetTeam(r.Context(), key.TeamID)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return nil, errInvalidKey
	}
	if err != nil {
		return nil, wrap(err, "look up team of API key")
	}
	return &principal{key: key, team: t}, nil
}
