package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/sandboxes"
)

type createSandboxRequest struct {
	Template   string            `json:"template"`
	TTLSeconds *int64            `json:"ttl_seconds"`
	Metadata   map[string]string `json:"metadata"`
	Env        map[string]string `json:"env"`
	Snapshot   string            `json:"snapshot"`
	CPUs       int               `json:"cpus"`
	MemoryMiB  int               `json:"memory_mib"`
	DiskGiB    int               `json:"disk_gib"`
	// Network is the sandbox's network policy (see pandastack.NetworkPolicy).
	Network *pandastack.NetworkPolicy `json:"network"`
	// Volumes are mounted in the new sandbox (see pandastack.VolumeMount).
	Volumes []pandastack.VolumeMount `json:"volumes"`
	// AutoHibernateSeconds hibernates the sandbox after that long idle.
	AutoHibernateSeconds *int64 `json:"auto_hibernate_seconds"`
	// Lifetime is "sandbox" (the default) or "service" (see
	// pandastack.LifetimeService; machines.go).
	Lifetime string `json:"lifetime"`
	// OnExpiry is "kill" (the default) or "hibernate" (pandastack.OnExpiry).
	OnExpiry string `json:"on_expiry"`
}

type ttlRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds"`
}

type sandboxList struct {
	Sandboxes []pandastack.Sandbox `json:"sandboxes"`
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var req createSandboxRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Network != nil {
		if _, err := s.network(); err != nil { // this server gives sandboxes no network
			return err
		}
	}
	p := caller(r)
	sb, err := s.sbx.Create(r.Context(), p.team.ID, sandboxes.CreateParams{
		Template: strings.TrimSpace(req.Template), Snapshot: req.Snapshot, Lifetime: req.Lifetime,
		TTLSeconds: req.TTLSeconds, AutoHibernateSeconds: req.AutoHibernateSeconds,
		Metadata: req.Metadata, Env: req.Env, CPUs: req.CPUs, MemoryMiB: req.MemoryMiB, DiskGiB: req.DiskGiB,
		Network: req.Network, Volumes: req.Volumes, OnExpiry: req.OnExpiry,
	})
	if err != nil {
		return err // the service says what it was doing
	}
	s.log.InfoContext(r.Context(), "sandbox created", "request_id", requestID(r),
		"sandbox", sb.ID, "team", p.team.Name, "template", sb.Template, "lifetime", sb.Lifetime)
	writeJSON(w, http.StatusCreated, s.present(r, sb))
	return nil
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	f := pandastack.SandboxFilter{TeamID: caller(r).team.ID, LiveOnly: true}
	q := r.URL.Query()
	switch st := q.Get("state"); st {
	case "", "live":
	case "all":
		f.LiveOnly = false
	default:
		return invalid("state must be live or all, got %q", st)
	}
	for name, values := range q {
		key, ok := strings.CutPrefix(name, "metadata.")
		if !ok {
			continue
		}
		if key == "" {
			return invalid("metadata filter needs a key: metadata.KEY=VALUE")
		}
		if len(values) > 1 {
			return invalid("metadata.%s is given %d times; a key can be matched once", key, len(values))
		}
		if f.Metadata == nil {
			f.Metadata = map[string]string{}
		}
		f.Metadata[key] = values[0]
	}
	sbs, err := s.cfg.Store.ListSandboxes(r.Context(), f)
	if err != nil {
		return wrap(err, "list sandboxes")
	}
	if sbs == nil {
		sbs = []pandastack.Sandbox{}
	}
	mounts, err := s.volumeMounts(r, caller(r).team.ID)
	if err != nil {
		return err
	}
	for i := range sbs {
		sbs[i] = s.presentWith(r, sbs[i], mounts)
	}
	writeJSON(w, http.StatusOK, sandboxList{Sandboxes: sbs})
	return nil
}

// ownSandbox loads the sandbox named by the {id} path value. Another team's
// sandbox is reported exactly like one that does not exist.
func (s *Server) ownSandbox(r *http.Request) (pandastack.Sandbox, error) {
	id := r.PathValue("id")
	notFound := pandastack.Errorf(pandastack.ENotFound, "sandbox %s not found", id)
	sb, err := s.cfg.Store.GetSandbox(r.Context(), id)
	if pandastack.ErrorCode(err) == pandastack.ENotFound {
		return sb, notFound
	}
	if err != nil {
		return sb, wrap(err, "get sandbox "+id)
	}
	if sb.TeamID != caller(r).team.ID {
		return pandastack.Sandbox{}, notFound
	}
	if sb.ManagedBy != "" && r.Pattern != "GET /v1/sandboxes/{id}" {
		return pandastack.Sandbox{}, managedError(sb)
	}
	return sb, nil
}

// managedError refuses a change to a platform service's machine through
// the sandbox API: a database, app or function keeps records of its
// machines that a kill, exec or fork from outside would leave wrong.
func managedError(sb pandastack.Sandbox) error {
	kind, id := pandastack.SplitManagedBy(sb.ManagedBy)
	return pandastack.Errorf(pandastack.EConflict, "sandbox %s is a machine of %s %s: manage it through /v1/%ss/%s", sb.ID, kind, id, kind, id)
}

// liveSandbox is ownSandbox for operations that need the VM: an ended
// sandbox answers 410 gone, saying when and how it ended.
func (s *Server) liveSandbox(r *http.Request) (pandastack.Sandbox, error) {
	sb, err := s.ownSandbox(r)
	if err != nil {
		return sb, err
	}
	if !sb.State.Live() {
		return sb, goneError(sb)
	}
	return sb, nil
}

func goneError(sb pandastack.Sandbox) error {
	how := string(sb.State)
	if sb.EndedAt == nil {
		return pandastack.Errorf(pandastack.EGone, "sandbox %s was %s", sb.ID, how)
	}
	msg := fmt.Sprintf("sandbox %s was %s at %s", sb.ID, how, sb.EndedAt.UTC().Format(time.RFC3339))
	if sb.EndReason != "" && sb.EndReason != how {
		msg += " (" + sb.EndReason + ")"
	}
	return pandastack.Errorf(pandastack.EGone, "%s", msg)
}

// guest returns the live guest of the {id} sandbox.
func (s *Server) guest(r *http.Request) (pandastack.Guest, error) {
	sb, err := s.liveSandbox(r)
	if err != nil {
		return nil, err
	}
	g, err := s.cfg.Engine.Guest(r.Context(), sb.ID)
	if err != nil {
		return nil, wrap(err, "connect to sandbox "+sb.ID)
	}
	return g, nil
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.ownSandbox(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.present(r, sb))
	return nil
}

// killSandbox is idempotent: killing a sandbox that has already ended
// (killed, expired or failed) also answers 204.
func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.ownSandbox(r)
	if err != nil {
		return err
	}
	if sb.State.Live() {
		err := s.cfg.Engine.Kill(r.Context(), sb.ID, pandastack.StateKilled)
		if err != nil && pandastack.ErrorCode(err) != pandastack.EGone {
			return wrap(err, "kill sandbox "+sb.ID)
		}
		s.log.InfoContext(r.Context(), "sandbox killed", "request_id", requestID(r), "sandbox", sb.ID)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTTL(w http.ResponseWriter, r *http.Request) error {
	var req ttlRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.TTLSeconds == nil {
		return invalid("ttl_seconds is required")
	}
	if _, err := s.sbx.TTL(req.TTLSeconds); err != nil {
		return err
	}
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	updated, err := s.sbx.SetTTL(r.Context(), sb, req.TTLSeconds)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.present(r, updated))
	return nil
}

// present prepares a sandbox for the wire: metadata is always an object;
// its template version, port domain and network policy are filled in.
func (s *Server) present(r *http.Request, sb pandastack.Sandbox) pandastack.Sandbox {
	mounts, err := s.volumeMounts(r, sb.TeamID)
	if err != nil {
		s.log.WarnContext(r.Context(), "list volumes", "err", err)
	}
	return s.presentWith(r, sb, mounts)
}

// volumeMounts maps a team's sandboxes to the volumes attached to them.
func (s *Server) volumeMounts(r *http.Request, teamID string) (map[string][]pandastack.VolumeMount, error) {
	vols, err := s.cfg.Store.ListVolumes(r.Context(), teamID)
	if err != nil {
		return nil, wrap(err, "list volumes")
	}
	out := map[string][]pandastack.VolumeMount{}
	for _, v := range vols {
		if v.SandboxID != "" {
			out[v.SandboxID] = append(out[v.SandboxID], pandastack.VolumeMount{Volume: v.ID, Path: v.MountPath})
		}
	}
	return out, nil
}

// presentWith is present with the team's volume mounts already looked up.
func (s *Server) presentWith(r *http.Request, sb pandastack.Sandbox, mounts map[string][]pandastack.VolumeMount) pandastack.Sandbox {
	if sb.State.Live() {
		sb.Volumes = mounts[sb.ID]
	}
	if sb.Metadata == nil {
		sb.Metadata = map[string]string{}
	}
	if sb.Lifetime == "" {
		sb.Lifetime = pandastack.LifetimeSandbox
	}
	sb = s.presentNetwork(sb)
	if sb.TemplateID != "" && sb.TemplateVersion == 0 && s.cfg.Templates != nil {
		sb.TemplateVersion = s.cfg.Templates.VersionOf(r.Context(), sb.TeamID, sb.Template, sb.TemplateID)
	}
	if ds, ok := s.cfg.Builder.(diskSizer); ok && sb.TemplateID != "" && sb.DiskMiB == 0 {
		sb.DiskMiB = ds.DiskMiB(r.Context(), sb.Template, sb.TemplateID) // a record from before disks were kept
	}
	return sb
}

// diskSizer says a template build's disk size (the host's builder).
type diskSizer interface {
	DiskMiB(ctx context.Context, name, id string) int
}
