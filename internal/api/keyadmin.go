package api

import (
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/auth"
)

// keyInfo is an API key as listed: never its secret or hash.
type keyInfo struct {
	ID        string     `json:"id"`
	Team      string     `json:"team"`
	TeamID    string     `json:"team_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

type keyList struct {
	Keys []keyInfo `json:"keys"`
}

// listKeys: GET /v1/keys. An admin key lists every team's keys, or one
// team's with ?team=ID|NAME; any other key lists its own team's (and may
// name only its own team). Revoked keys are listed with revoked_at.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	p := caller(r)
	teamID := p.team.ID
	if ref := r.URL.Query().Get("team"); ref != "" {
		t, err := s.teamByRef(r.Context(), ref)
		if err != nil {
			return err
		}
		if !p.key.Admin && t.ID != p.team.ID {
			return pandastack.Errorf(pandastack.ENotFound, "team %s not found", ref)
		}
		teamID = t.ID
	} else if p.key.Admin {
		teamID = "" // every team's
	}
	keys, err := s.cfg.Store.ListAPIKeys(r.Context(), teamID)
	if err != nil {
		return wrap(err, "list API keys")
	}
	names := map[string]string{p.team.ID: p.team.Name}
	out := keyList{Keys: make([]keyInfo, 0, len(keys))}
	for _, k := range keys {
		name, ok := names[k.TeamID]
		if !ok {
			if t, err := s.cfg.Store.GetTeam(r.Context(), k.TeamID); err == nil {
				name = t.Name
			}
			names[k.TeamID] = name
		}
		out.Keys = append(out.Keys, presentKey(k, name))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func presentKey(k pandastack.APIKey, team string) keyInfo {
	return keyInfo{ID: k.ID, Team: team, TeamID: k.TeamID, Name: k.Name, Prefix: k.Prefix,
		Admin: k.Admin, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// ownKey loads the {id} key if the caller may manage it: an admin any key,
// any other key its own team's. Another team's key answers 404 like a
// missing one.
func (s *Server) ownKey(r *http.Request) (pandastack.APIKey, error) {
	id, p := r.PathValue("id"), caller(r)
	k, err := s.cfg.Store.GetAPIKey(r.Context(), id)
	if err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		return k, wrap(err, "get API key")
	}
	if err != nil || (!p.key.Admin && k.TeamID != p.team.ID) {
		return pandastack.APIKey{}, pandastack.Errorf(pandastack.ENotFound, "API key %s not found", id)
	}
	return k, nil
}

// revokeKey: DELETE /v1/keys/{id}. The key fails with 401 from the next
// request on (every request looks its key up in the store: nothing caches
// it). Revoking a revoked key is a no-op; the last active admin key cannot
// be revoked (rotate it instead), so the server is never left without one.
func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) error {
	k, err := s.ownKey(r)
	if err != nil {
		return err
	}
	if err := s.revoke(r, k); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) revoke(r *http.Request, k pandastack.APIKey) error {
	if k.RevokedAt != nil {
		return nil
	}
	if k.Admin {
		if err := s.keepAnAdmin(r, k.ID); err != nil {
			return err
		}
	}
	if _, err := s.cfg.Store.RevokeAPIKey(r.Context(), k.ID, time.Now().UTC()); err != nil {
		return wrap(err, "revoke API key")
	}
	s.limiter.Forget(k.ID)
	s.log.InfoContext(r.Context(), "API key revoked", "request_id", requestID(r),
		"key_id", k.ID, "prefix", k.Prefix, "team_id", k.TeamID, "by", caller(r).key.Prefix)
	return nil
}

// keepAnAdmin refuses to revoke admin key id when no other active admin
// key exists.
func (s *Server) keepAnAdmin(r *http.Request, id string) error {
	all, err := s.cfg.Store.ListAPIKeys(r.Context(), "")
	if err != nil {
		return wrap(err, "list API keys")
	}
	for _, o := range all {
		if o.Admin && o.RevokedAt == nil && o.ID != id {
			return nil
		}
	}
	return pandastack.Errorf(pandastack.EConflict, "key %s is the last active admin key; rotate it instead of revoking it", id)
}

// rotateKey: POST /v1/keys/{id}/rotate makes a new key of the same team,
// name and role, then revokes the old one; the new secret is in this
// response only. A revoked key cannot be rotated (409).
func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) error {
	old, err := s.ownKey(r)
	if err != nil {
		return err
	}
	if old.RevokedAt != nil {
		return pandastack.Errorf(pandastack.EConflict, "API key %s is revoked; create a new key instead", old.ID)
	}
	gen := auth.NewKey // a rotated key keeps its shape
	if auth.IsE2BKey(old.Prefix) {
		gen = auth.NewE2BKey
	}
	secret, k, err := newKey(r.Context(), s.cfg.Store, old.TeamID, old.Name, old.Admin, gen)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Store.RevokeAPIKey(r.Context(), old.ID, time.Now().UTC()); err != nil {
		// Leave no second live key behind: the caller still has the old one.
		if _, rerr := s.cfg.Store.RevokeAPIKey(r.Context(), k.ID, time.Now().UTC()); rerr != nil {
			s.log.ErrorContext(r.Context(), "rotate: revoke the new key after failing to revoke the old", "request_id", requestID(r), "key_id", k.ID, "err", rerr)
		}
		return wrap(err, "revoke rotated API key")
	}
	s.limiter.Forget(old.ID)
	t, err := s.cfg.Store.GetTeam(r.Context(), k.TeamID)
	if err != nil {
		return wrap(err, "get team of API key")
	}
	s.log.InfoContext(r.Context(), "API key rotated", "request_id", requestID(r),
		"old_key_id", old.ID, "key_id", k.ID, "prefix", k.Prefix, "team", t.Name, "by", caller(r).key.Prefix)
	writeJSON(w, http.StatusCreated, createKeyResponse{
		ID: k.ID, Key: secret, Team: t.Name, TeamID: k.TeamID,
		Name: k.Name, Prefix: k.Prefix, Admin: k.Admin,
	})
	return nil
}
