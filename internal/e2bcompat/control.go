package e2bcompat

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

// defaultTimeout is a sandbox's life when the create names none (E2B's 300 s).
const defaultTimeout = 300 * time.Second

// templates maps E2B's template names to PandaStack's; other names pass
// through unchanged.
var templates = map[string]string{
	"base":                "base",
	"code-interpreter-v1": "code-interpreter",
}

// isControlPath reports whether p is on E2B's control-plane paths.
func isControlPath(p string) bool {
	for _, root := range []string{"/sandboxes", "/v2/sandboxes"} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}

// controlHandler handles one control-plane route for the caller's team.
type controlHandler func(s *Server, w http.ResponseWriter, r *http.Request, team string) error

var controlRoutes = map[string]controlHandler{
	"POST /sandboxes":                 (*Server).create,
	"POST /v2/sandboxes":              (*Server).create,
	"GET /sandboxes":                  (*Server).list,
	"GET /v2/sandboxes":               (*Server).list,
	"GET /sandboxes/{id}":             (*Server).info,
	"DELETE /sandboxes/{id}":          (*Server).kill,
	"POST /sandboxes/{id}/timeout":    (*Server).setTimeout,
	"POST /sandboxes/{id}/connect":    (*Server).connect,
	"POST /v2/sandboxes/{id}/connect": (*Server).connect,
	"POST /sandboxes/{id}/resume":     (*Server).resume,
	"POST /sandboxes/{id}/pause":      (*Server).pause,
	"GET /sandboxes/{id}/metrics":     (*Server).metrics,
	"PUT /sandboxes/{id}/network":     (*Server).updateNetwork,
}

// serveControl authenticates the API key and serves a control-plane route.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request, auth Authenticate) {
	team, err := auth(r)
	if err != nil {
		if c := pandastack.ErrorCode(err); c == pandastack.EUnauthorized || c == pandastack.EForbidden {
			writeAPIError(w, http.StatusUnauthorized, "Invalid API key: "+pandastack.ErrorMessage(err))
			return
		}
		s.writeControlError(w, r, err) // rate limited (Retry-After is set), or the store failed
		return
	}
	mux := http.NewServeMux()
	for pattern, h := range controlRoutes {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(s, w, r, team); err != nil {
				s.writeControlError(w, r, err)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not part of the E2B API this server serves", r.Method, r.URL.Path))
	})
	mux.ServeHTTP(w, r)
}

// apiError is E2B's error body: the SDKs branch on its numeric code.
type apiError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeAPIError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Code: status, Message: msg})
}

// writeControlError maps a PandaStack error to E2B's status and body; the
// details go to the log only.
func (s *Server) writeControlError(w http.ResponseWriter, r *http.Request, err error) {
	code := pandastack.ErrorCode(err)
	status := api.StatusForCode(code)
	if code == pandastack.EGone {
		status = http.StatusNotFound // E2B knows ended sandboxes as missing
	}
	msg := pandastack.ErrorMessage(err)
	if status >= 500 {
		s.log.ErrorContext(r.Context(), "e2b control plane", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeAPIError(w, status, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads an optional JSON body (the SDKs send chunked bodies,
// sometimes none); unknown fields are ignored as E2B's API does.
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read request body: %w", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return pandastack.Errorf(pandastack.EInvalid, "request body is not valid JSON: %v", err)
	}
	return nil
}

// sandboxJSON is E2B's Sandbox (create and connect answers).
type sandboxJSON struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detailJSON is E2B's SandboxDetail and ListedSandbox.
type detailJSON struct {
	TemplateID      string            `json:"templateID"`
	Alias           string            `json:"alias,omitempty"`
	SandboxID       string            `json:"sandboxID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int               `json:"memoryMB"`
	DiskSizeMB      int               `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata"`
	State           string            `json:"state"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
	Lifecycle       *lifecycleJSON    `json:"lifecycle,omitempty"`
}

func (s *Server) present(sb pandastack.Sandbox) sandboxJSON {
	return sandboxJSON{SandboxID: s.e2bID(sb.ID), TemplateID: sb.Template, Alias: e2bAlias(sb.Template),
		ClientID: "pandastack", EnvdVersion: EnvdVersion, EnvdAccessToken: s.accessToken(sb.ID)}
}

func (s *Server) detail(sb pandastack.Sandbox, withToken bool) detailJSON {
	d := detailJSON{TemplateID: sb.Template, Alias: e2bAlias(sb.Template), SandboxID: s.e2bID(sb.ID), ClientID: "pandastack",
		StartedAt: sb.CreatedAt, EndAt: endAt(sb), CPUCount: sb.CPUs, MemoryMB: sb.MemoryMiB, DiskSizeMB: sb.DiskMiB,
		Metadata: userMetadata(sb.Metadata), State: e2bState(sb.State), EnvdVersion: EnvdVersion}
	if withToken {
		d.EnvdAccessToken = s.accessToken(sb.ID)
		d.Lifecycle = lifecycleOf(sb)
	}
	return d
}

// e2bAlias is E2B's name for a PandaStack template.
func e2bAlias(tpl string) string {
	for e, p := range templates {
		if p == tpl && e != p {
			return e
		}
	}
	return tpl
}

func e2bState(st pandastack.SandboxState) string {
	if st == pandastack.StateHibernated {
		return "paused"
	}
	return "running"
}

// userMetadata is a sandbox's metadata without the keys this package
// keeps in it.
func userMetadata(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		if !reservedMetadata(k) {
			out[k] = v
		}
	}
	return out
}

type createRequest struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkRequest   `json:"network"`
	AutoPause           bool              `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"` // false is served as true (lifecycle.go)
	AutoResume          *autoResumeConfig `json:"autoResume"`
}

// create: POST /sandboxes and /v2/sandboxes → 201 Sandbox.
func (s *Server) create(w http.ResponseWriter, r *http.Request, team string) error {
	var req createRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.TemplateID == "" {
		req.TemplateID = "base"
	}
	tpl, ok := templates[req.TemplateID]
	if !ok {
		tpl = req.TemplateID
	}
	public := true
	var allowOut, denyOut []string
	if err := req.Network.unsupported(); err != nil {
		return err
	}
	if n := req.Network; n != nil {
		allowOut, denyOut = n.AllowOut, n.DenyOut
		if n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic {
			public = false
		}
	}
	// In force before the sandbox's first instruction: the engine applies
	// a create's policy before it resumes the VM.
	policy, err := egressPolicy(allowOut, denyOut, req.AllowInternetAccess)
	if err != nil {
		return err
	}
	onExpiry, resume, err := createLifecycle(req.AutoPause, req.AutoResume)
	if err != nil {
		return err
	}
	meta := map[string]string{autoResumeKey: resume}
	for k, v := range req.Metadata {
		if reservedMetadata(k) {
			return pandastack.Errorf(pandastack.EInvalid, "metadata key %q is reserved (keys starting %q are)", k, reservedPrefix)
		}
		meta[k] = v
	}
	if public {
		meta[publicKey] = "true"
	}
	ttl := int64(defaultTimeout / time.Second)
	if req.Timeout != nil {
		ttl = *req.Timeout
	}
	sb, err := s.sbx.Create(r.Context(), team, sandboxes.CreateParams{Template: tpl, TTLSeconds: &ttl,
		Metadata: meta, Env: req.EnvVars, Network: policy, OnExpiry: onExpiry})
	if err != nil {
		return err
	}
	s.log.InfoContext(r.Context(), "sandbox created", "sandbox", sb.ID, "team_id", team, "template", sb.Template)
	out := s.present(sb)
	out.TemplateID, out.Alias = req.TemplateID, req.TemplateID
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// ownSandbox loads the live sandbox {id} of team; an ended one, another
// team's and one that never existed are all E2B's 404.
func (s *Server) ownSandbox(r *http.Request, team string) (pandastack.Sandbox, error) {
	id := r.PathValue("id")
	notFound := pandastack.Errorf(pandastack.ENotFound, "sandbox %s not found", id)
	native, ok := s.nativeID(id)
	if !ok {
		return pandastack.Sandbox{}, notFound
	}
	sb, err := s.cfg.Store.GetSandbox(r.Context(), native)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return sb, notFound
	}
	if err != nil {
		return sb, fmt.Errorf("get sandbox %s: %w", native, err)
	}
	// A platform service's machine (a database's, an app's) is not a
	// sandbox E2B code may drive.
	if sb.TeamID != team || !sb.State.Live() || sb.ManagedBy != "" {
		return pandastack.Sandbox{}, notFound
	}
	return sb, nil
}

// info: GET /sandboxes/{id} → SandboxDetail (with the access token, which
// SDKs before 2.5 read here on connect).
func (s *Server) info(w http.ResponseWriter, r *http.Request, team string) error {
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.detail(sb, true))
	return nil
}

// kill: DELETE /sandboxes/{id} → 204; 404 when it is not there.
func (s *Server) kill(w http.ResponseWriter, r *http.Request, team string) error {
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	if err := s.cfg.Engine.Kill(r.Context(), sb.ID, pandastack.StateKilled); err != nil {
		return fmt.Errorf("kill sandbox %s: %w", sb.ID, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type timeoutRequest struct {
	Timeout *int64 `json:"timeout"`
}

// setTimeout: POST /sandboxes/{id}/timeout {"timeout":s} → 204. The
// sandbox then ends timeout seconds from now (sooner or later than before).
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, team string) error {
	var req timeoutRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	if req.Timeout == nil {
		return pandastack.Errorf(pandastack.EInvalid, "timeout is required")
	}
	if _, err := s.sbx.SetTTL(r.Context(), sb, req.Timeout); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// connect: POST /sandboxes/{id}/connect and /v2/... {"timeout":s} → 200
// Sandbox when running, 201 when it was paused and is resumed. The
// timeout only ever extends the sandbox's life.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, team string) error {
	var req timeoutRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if sb.State == pandastack.StateHibernated {
		if sb, err = s.cfg.Engine.Wake(r.Context(), sb.ID); err != nil {
			return fmt.Errorf("resume sandbox %s: %w", sb.ID, err)
		}
		status = http.StatusCreated
	}
	if sb, err = s.extend(r, sb, req.Timeout); err != nil {
		return err
	}
	writeJSON(w, status, s.present(sb))
	return nil
}

// extend moves sb's end to timeout seconds (default 300) from now when that
// is later than it is.
func (s *Server) extend(r *http.Request, sb pandastack.Sandbox, timeout *int64) (pandastack.Sandbox, error) {
	sec := int64(defaultTimeout / time.Second)
	if timeout != nil {
		sec = *timeout
	}
	if sb.Lifetime.IsService() || !time.Now().Add(time.Duration(sec)*time.Second).After(sb.ExpiresAt) {
		return sb, nil
	}
	return s.sbx.SetTTL(r.Context(), sb, &sec)
}

// resume: POST /sandboxes/{id}/resume (SDKs before 2.5) → 201 Sandbox;
// 409 when it is running.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, team string) error {
	var req timeoutRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	if sb.State != pandastack.StateHibernated {
		return pandastack.Errorf(pandastack.EConflict, "sandbox %s is already running", r.PathValue("id"))
	}
	if sb, err = s.cfg.Engine.Wake(r.Context(), sb.ID); err != nil {
		return fmt.Errorf("resume sandbox %s: %w", sb.ID, err)
	}
	if sb, err = s.extend(r, sb, req.Timeout); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.present(sb))
	return nil
}

// pause: POST /sandboxes/{id}/pause → 204 (hibernated: its whole state
// saved, memory and CPU freed); 409 when already paused.
func (s *Server) pause(w http.ResponseWriter, r *http.Request, team string) error {
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	if sb.State == pandastack.StateHibernated {
		return pandastack.Errorf(pandastack.EConflict, "sandbox %s is already paused", r.PathValue("id"))
	}
	if _, err := s.cfg.Engine.Hibernate(r.Context(), sb.ID); err != nil {
		return fmt.Errorf("pause sandbox %s: %w", sb.ID, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
