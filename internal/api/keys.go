package api

import (
	"context"
	"net/http"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/auth"
	"github.com/pandastack/pandastack/internal/quotas"
)

// AdminTeam is the team Bootstrap creates for the first admin key.
const AdminTeam = "admin"

type createKeyRequest struct {
	Team string `json:"team"`
	Name string `json:"name"`
	// E2B makes the key in E2B's shape (e2b_ and 40 hex) for the E2B
	// SDKs (internal/e2bcompat); it works with every API alike.
	E2B bool `json:"e2b"`
}

type createKeyResponse struct {
	ID     string `json:"id"`
	Key    string `json:"key"`
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
	Name   string `json:"name"`
	Prefix string `json:"prefix"`
	Admin  bool   `json:"admin"`
}

// createKey makes a (non-admin) key for a team, creating the team if
// needed. The secret is in this response only.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	var req createKeyRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	gen := auth.NewKey
	if req.E2B {
		gen = auth.NewE2BKey
	}
	secret, key, err := createKey(r.Context(), s.cfg.Store, req.Team, req.Name, false, gen)
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "API key created", "request_id", requestID(r),
		"key_id", key.ID, "prefix", key.Prefix, "team", req.Team, "by", caller(r).key.Prefix)
	writeJSON(w, http.StatusCreated, createKeyResponse{
		ID: key.ID, Key: secret, Team: req.Team, TeamID: key.TeamID,
		Name: key.Name, Prefix: key.Prefix, Admin: key.Admin,
	})
	return nil
}

// CreateKey makes an API key for the team named teamName, creating the team
// if it does not exist, and returns the secret (to be shown once) and the
// stored key. keyName defaults to "default". It is used by POST /v1/keys and
// by local (server-side) CLI commands.
func CreateKey(ctx context.Context, store pandastack.Store, teamName, keyName string, admin bool) (string, pandastack.APIKey, error) {
	return createKey(ctx, store, teamName, keyName, admin, auth.NewKey)
}

// keyMaker makes a key's secret, display prefix and hash (auth.NewKey,
// auth.NewE2BKey).
type keyMaker func() (secret, prefix, hash string, err error)

func createKey(ctx context.Context, store pandastack.Store, teamName, keyName string, admin bool, gen keyMaker) (string, pandastack.APIKey, error) {
	if err := checkName("team", teamName); err != nil {
		return "", pandastack.APIKey{}, err
	}
	if keyName == "" {
		keyName = "default"
	}
	if len(keyName) > 128 {
		return "", pandastack.APIKey{}, invalid("key name is longer than 128 bytes")
	}
	t, err := ensureTeam(ctx, store, teamName)
	if err != nil {
		return "", pandastack.APIKey{}, err
	}
	return newKey(ctx, store, t.ID, keyName, admin, gen)
}

// newKey makes and stores a key of the team with that id.
func newKey(ctx context.Context, store pandastack.Store, teamID, keyName string, admin bool, gen keyMaker) (string, pandastack.APIKey, error) {
	secret, prefix, hash, err := gen()
	if err != nil {
		return "", pandastack.APIKey{}, err
	}
	key := pandastack.APIKey{
		ID:        pandastack.NewID("key_"),
		TeamID:    teamID,
		Name:      keyName,
		Prefix:    prefix,
		Hash:      hash,
		Admin:     admin,
		CreatedAt: time.Now().UTC(),
	}
	if err := store.CreateAPIKey(ctx, key); err != nil {
		return "", pandastack.APIKey{}, wrap(err, "store API key")
	}
	return secret, key, nil
}

// ensureTeam returns the team named name, creating it if absent.
func ensureTeam(ctx context.Context, store pandastack.Store, name string) (pandastack.Team, error) {
	t, err := store.TeamByName(ctx, name)
	if err == nil {
		return t, nil
	}
	if pandastack.ErrorCode(err) != pandastack.ENotFound {
		return t, wrap(err, "look up team "+name)
	}
	t = pandastack.Team{ID: pandastack.NewID("team_"), Name: name, CreatedAt: time.Now().UTC()}
	err = store.CreateTeam(ctx, t)
	if pandastack.ErrorCode(err) == pandastack.EConflict {
		// Created concurrently by someone else: use theirs.
		t, err = store.TeamByName(ctx, name)
	}
	if err != nil {
		return t, wrap(err, "create team "+name)
	}
	return t, nil
}

// Bootstrap makes the first admin key when the store has no keys at all: it
// creates team "admin" and an admin key in it and returns the secret with
// created true. With keys already present it does nothing. The admin team is
// the operator's own: it is given no quota limits (an explicit override an
// admin can change with PUT /v1/teams/admin/quotas).
func Bootstrap(ctx context.Context, store pandastack.Store) (adminKey string, created bool, err error) {
	n, err := store.CountAPIKeys(ctx)
	if err != nil {
		return "", false, wrap(err, "count API keys")
	}
	if n > 0 {
		return "", false, nil
	}
	secret, key, err := CreateKey(ctx, store, AdminTeam, "bootstrap", true)
	if err != nil {
		return "", false, wrap(err, "bootstrap admin key")
	}
	if err := store.PutTeamQuotas(ctx, pandastack.TeamQuotas{TeamID: key.TeamID,
		Overrides: quotas.Unlimited(), UpdatedAt: time.Now().UTC()}); err != nil {
		return "", false, wrap(err, "lift the admin team's quotas")
	}
	return secret, true, nil
}

// checkName validates a team or template name: 1-64 of [A-Za-z0-9._-],
// starting with a letter or digit.
func checkName(what, s string) error {
	if s == "" {
		return invalid("%s is required", what)
	}
	if len(s) > 64 {
		return invalid("%s name must be at most 64 characters", what)
	}
	for i, c := range []byte(s) {
		alnum := ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return invalid("%s name %q may hold only letters, digits, '.', '_' and '-', starting with a letter or digit", what, s)
		}
	}
	return nil
}
