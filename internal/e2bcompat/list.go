package e2bcompat

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pandastack/pandastack"
)

// listLimit is the largest (and default) page of GET /v2/sandboxes.
const listLimit = 100

// list: GET /v2/sandboxes?metadata=&state=&limit=&nextToken= → the team's
// live sandboxes, newest first, a page at a time (X-Next-Token).
func (s *Server) list(w http.ResponseWriter, r *http.Request, team string) error {
	q := r.URL.Query()
	meta, err := parseMetadataFilter(q.Get("metadata"))
	if err != nil {
		return err
	}
	states := map[string]bool{}
	for _, st := range strings.Split(q.Get("state"), ",") {
		switch st = strings.TrimSpace(st); st {
		case "":
		case "running", "paused":
			states[st] = true
		default:
			return pandastack.Errorf(pandastack.EInvalid, "state must be running or paused, got %q", st)
		}
	}
	limit := listLimit
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > listLimit {
			return pandastack.Errorf(pandastack.EInvalid, "limit must be 1-%d, got %q", listLimit, v)
		}
	}
	sbs, err := s.cfg.Store.ListSandboxes(r.Context(), pandastack.SandboxFilter{TeamID: team, LiveOnly: true,
		Metadata: meta, Lifetime: pandastack.LifetimeSandbox})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	sbs = slices.DeleteFunc(sbs, func(sb pandastack.Sandbox) bool { return sb.ManagedBy != "" })
	sort.Slice(sbs, func(i, j int) bool {
		if !sbs[i].CreatedAt.Equal(sbs[j].CreatedAt) {
			return sbs[i].CreatedAt.After(sbs[j].CreatedAt)
		}
		return sbs[i].ID > sbs[j].ID
	})
	after := q.Get("nextToken")
	out := []detailJSON{}
	next := ""
	for _, sb := range sbs {
		if after != "" {
			if s.e2bID(sb.ID) == after {
				after = ""
			}
			continue
		}
		if len(states) > 0 && !states[e2bState(sb.State)] {
			continue
		}
		if len(out) == limit {
			next = out[len(out)-1].SandboxID
			break
		}
		out = append(out, s.detail(sb, false))
	}
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// parseMetadataFilter decodes E2B's metadata filter: the query value is a
// query string itself (k=v&k2=v2, each part escaped once more).
func parseMetadataFilter(v string) (map[string]string, error) {
	if v == "" {
		return nil, nil
	}
	inner, err := url.QueryUnescape(v)
	if err != nil {
		return nil, pandastack.Errorf(pandastack.EInvalid, "metadata filter is not escaped right: %v", err)
	}
	out := map[string]string{}
	for _, pair := range strings.Split(inner, "&") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, pandastack.Errorf(pandastack.EInvalid, "metadata filter %q is not key=value", pair)
		}
		k, err1 := url.QueryUnescape(k)
		val, err2 := url.QueryUnescape(val)
		if err := errors.Join(err1, err2); err != nil {
			return nil, pandastack.Errorf(pandastack.EInvalid, "metadata filter is not escaped right: %v", err)
		}
		out[k] = val
	}
	return out, nil
}
