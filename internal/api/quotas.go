package api

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/diskreserve"
	"github.com/pandastack/pandastack/internal/quotas"
)

// rateLimit takes one request from the caller's key's token bucket; an
// empty bucket answers 429 rate_limited with Retry-After (whole seconds).
// Only authenticated API routes are limited: /v1/health and the sandbox
// port proxy are not API calls (the proxy's traffic is the sandbox's own).
func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request, p *principal) error {
	l, err := s.quotas.Limits(r.Context(), p.team.ID)
	if err != nil {
		return wrap(err, "read quotas")
	}
	ok, wait := s.limiter.Allow(p.key.ID, l)
	if ok {
		return nil
	}
	sec := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(sec))
	return pandastack.Errorf(pandastack.ERateLimited,
		"API key %s... sent more than its team's requests_per_second (%g, burst %d); retry in %d s",
		p.key.Prefix, l.RequestsPerSecond, l.Burst, sec)
}

// quotaResponse is a team's quotas: the effective limits, which of them
// the team's own overrides set, and what it holds now.
type quotaResponse struct {
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
	quotas.Limits
	Overridden []string     `json:"overridden"`
	Usage      quotas.Usage `json:"usage"`
	// Storage is the host's VM filesystem: its size, free space and the
	// reserve below which new allocations answer 507. Shown to admins.
	Storage *diskreserve.Status `json:"storage,omitempty"`
}

// quotaFields are the names of every limit, in the order responses list
// them.
var quotaFields = []string{"max_sandboxes", "max_service_machines", "max_snapshots", "max_volumes",
	"max_concurrent_builds", "max_vcpus", "max_memory_mib", "max_disk_gib", "requests_per_second", "burst"}

func overriddenFields(o pandastack.QuotaOverrides) []string {
	var m map[string]any
	b, _ := json.Marshal(o) // nil fields are omitted
	_ = json.Unmarshal(b, &m)
	out := []string{}
	for _, f := range quotaFields {
		if _, ok := m[f]; ok {
			out = append(out, f)
		}
	}
	return out
}

func (s *Server) presentQuotas(ctx context.Context, t pandastack.Team, admin bool) (quotaResponse, error) {
	o, err := s.quotas.Overrides(ctx, t.ID)
	if err != nil {
		return quotaResponse{}, wrap(err, "read quotas")
	}
	u, err := s.quotas.Usage(ctx, t.ID)
	if err != nil {
		return quotaResponse{}, wrap(err, "count usage")
	}
	out := quotaResponse{Team: t.Name, TeamID: t.ID, Limits: s.quotas.Defaults().With(o),
		Overridden: overriddenFields(o), Usage: u}
	if admin && s.cfg.Storage != nil {
		st, err := s.cfg.Storage.Status()
		if err != nil {
			return out, wrap(err, "read storage")
		}
		out.Storage = &st
	}
	return out, nil
}

// teamByRef finds a team by id or name.
func (s *Server) teamByRef(ctx context.Context, ref string) (pandastack.Team, error) {
	t, err := s.cfg.Store.GetTeam(ctx, ref)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		t, err = s.cfg.Store.TeamByName(ctx, ref)
	}
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return t, pandastack.Errorf(pandastack.ENotFound, "team %s not found", ref)
	}
	if err != nil {
		return t, wrap(err, "look up team")
	}
	return t, nil
}

// getTeamQuotas: GET /v1/teams/{team}/quotas (admin).
func (s *Server) getTeamQuotas(w http.ResponseWriter, r *http.Request) error {
	t, err := s.teamByRef(r.Context(), r.PathValue("team"))
	if err != nil {
		return err
	}
	out, err := s.presentQuotas(r.Context(), t, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getOwnQuotas: GET /v1/quotas, the caller's own team's.
func (s *Server) getOwnQuotas(w http.ResponseWriter, r *http.Request) error {
	out, err := s.presentQuotas(r.Context(), caller(r).team, caller(r).key.Admin)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// setTeamQuotas: PUT /v1/teams/{team}/quotas (admin). The body's fields
// change those limits; null puts one back to the server's default; fields
// not in the body keep their override.
func (s *Server) setTeamQuotas(w http.ResponseWriter, r *http.Request) error {
	var body map[string]json.RawMessage
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	t, err := s.teamByRef(r.Context(), r.PathValue("team"))
	if err != nil {
		return err
	}
	next, err := s.quotas.Overrides(r.Context(), t.ID)
	if err != nil {
		return wrap(err, "read quotas")
	}
	if err := applyQuotaFields(&next, body); err != nil {
		return err
	}
	if _, err := s.quotas.Set(r.Context(), t.ID, next); err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "team quotas changed", "request_id", requestID(r),
		"team", t.Name, "team_id", t.ID, "by", caller(r).key.Prefix, "changed", strings.Join(slices.Sorted(maps.Keys(body)), ","))
	out, err := s.presentQuotas(r.Context(), t, true)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// applyQuotaFields sets the fields of o that body names: a number sets
// the override, null removes it. Unknown fields and non-numbers are
// invalid; Validate checks the ranges.
func applyQuotaFields(o *pandastack.QuotaOverrides, body map[string]json.RawMessage) error {
	for _, k := range slices.Sorted(maps.Keys(body)) {
		v := body[k]
		if !slices.Contains(quotaFields, k) {
			return invalid("unknown quota %q (known: %s)", k, strings.Join(quotaFields, ", "))
		}
		var n *float64
		if err := json.Unmarshal(v, &n); err != nil {
			return invalid("%s must be a number, or null for the server's default", k)
		}
		if k == "requests_per_second" {
			o.RequestsPerSecond = n
			continue
		}
		var iv *int
		if n != nil {
			if *n != math.Trunc(*n) || math.Abs(*n) > 1<<40 {
				return invalid("%s must be a whole number, got %v", k, *n)
			}
			iv = new(int)
			*iv = int(*n)
		}
		switch k {
		case "max_sandboxes":
			o.MaxSandboxes = iv
		case "max_service_machines":
			o.MaxServiceMachines = iv
		case "max_snapshots":
			o.MaxSnapshots = iv
		case "max_volumes":
			o.MaxVolumes = iv
		case "max_concurrent_builds":
			o.MaxConcurrentBuilds = iv
		case "max_vcpus":
			o.MaxVCPUs = iv
		case "max_memory_mib":
			o.MaxMemoryMiB = iv
		case "max_disk_gib":
			o.MaxDiskGiB = iv
		case "burst":
			o.Burst = iv
		}
	}
	return nil
}
