// Package registry is the control plane's half of templates: which templates
// exist, per team, with their numbered versions, tags and build runs, all
// kept in the Store (pandastack.TemplateStore). The other half, the builder
// (internal/templates), runs on a host: it builds and bakes, and holds the
// files.
//
// Rules (README, "Templates per team"):
//   - A template belongs to a team, or (TeamID "") to the public catalog that
//     every team sees: the catalog templates the server builds, and custom
//     templates built with the admin key for no team.
//   - A team sees and resolves only its own templates and the public ones;
//     another team's template answers exactly like one that does not exist.
//   - A reference resolves within the caller's team first, then in the
//     public catalog. Public names are reserved: a team cannot build a
//     template named like a public one (EConflict).
//   - Custom builds of capped callers (every non-admin key) run at most
//     MaxBuildsPerTeam at once per team (EQuota beyond).
package registry

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// Builder is the host half: it builds catalog templates and custom ones
// from an uploaded build context, and returns the build (no version: the
// registry numbers versions).
type Builder interface {
	Build(ctx context.Context, name string, log io.Writer) (pandastack.Template, error)
	BuildFromTar(ctx context.Context, req pandastack.CustomBuild, tar io.Reader, log io.Writer) (pandastack.Template, error)
}

// Defaults of Config.
const (
	DefaultMaxBuildsPerTeam = 2
	DefaultMaxLogBytes      = 8 << 20
)

// Config configures a Registry.
type Config struct {
	Store   pandastack.TemplateStore
	Builder Builder // nil: builds answer EUnavailable
	// LogDir keeps build logs, one file per build run (ID.log).
	LogDir string
	// MaxLogBytes caps each kept build log (default DefaultMaxLogBytes);
	// what a build prints past it is streamed but not kept.
	MaxLogBytes int64
	// MaxBuildsPerTeam caps the custom builds a team runs at once
	// (default DefaultMaxBuildsPerTeam; admin builds are not capped).
	MaxBuildsPerTeam int
	// Quotas, when set, caps a team's builds in flight by its
	// max_concurrent_builds quota instead of MaxBuildsPerTeam.
	Quotas *quotas.Service
	// Catalog names the catalog templates: reserved public names even
	// before they are built.
	Catalog []string
	Logger  *slog.Logger
}

// Registry keeps templates per team. It is safe for concurrent use.
type Registry struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	running  map[string]bool // build runs in progress in this process, by id
	building map[string]int  // capped custom builds in progress, by team
}

// New makes a Registry.
func New(cfg Config) *Registry {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxLogBytes <= 0 {
		cfg.MaxLogBytes = DefaultMaxLogBytes
	}
	if cfg.MaxBuildsPerTeam <= 0 {
		cfg.MaxBuildsPerTeam = DefaultMaxBuildsPerTeam
	}
	return &Registry{cfg: cfg, log: cfg.Logger, running: map[string]bool{}, building: map[string]int{}}
}

// LatestTag always names a template's newest version.
const LatestTag = "latest"

// ParseRef splits a template reference: "name", "name:TAG" (or "name:3",
// "name:v3" for a version number) or "name@ID" (an exact build).
func ParseRef(ref string) (name, tag, id string) {
	if n, i, ok := strings.Cut(ref, "@"); ok {
		return n, "", i
	}
	name, tag, _ = strings.Cut(ref, ":")
	return name, tag, ""
}

// ValidName reports whether s is a valid template name or tag: 1-64 of
// [A-Za-z0-9._-], starting with a letter or digit.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, c := range []byte(s) {
		alnum := ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}

// notFound is the answer for a template the caller cannot see: one that
// does not exist and another team's read exactly the same.
func notFound(name string) error {
	return pandastack.Errorf(pandastack.ENotFound, "template %q not found: build it with `pandastack template build %s`", name, name)
}

// versions finds the template name a team sees: its own if it has one of
// that name, else the public one. owner is the team it belongs to.
func (r *Registry) versions(ctx context.Context, teamID, name string) (owner string, vs []pandastack.TemplateVersion, err error) {
	if teamID != "" {
		vs, err := r.cfg.Store.ListTemplateVersions(ctx, teamID, name)
		if err != nil {
			return "", nil, err
		}
		if len(vs) > 0 {
			return teamID, vs, nil
		}
	}
	vs, err = r.cfg.Store.ListTemplateVersions(ctx, "", name)
	if err != nil {
		return "", nil, err
	}
	if len(vs) == 0 {
		return "", nil, notFound(name)
	}
	return "", vs, nil
}

// Resolve finds the exact build a team's reference names (see ParseRef):
// within the team first, then in the public catalog. The template it
// returns carries its owner (TeamID), name, build ID and version.
func (r *Registry) Resolve(ctx context.Context, teamID, ref string) (pandastack.Template, error) {
	name, tag, id := ParseRef(ref)
	if !ValidName(name) || (tag != "" && !ValidName(tag)) || (id != "" && !ValidName(id)) {
		return pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "invalid template reference %q", ref)
	}
	owner, vs, err := r.versions(ctx, teamID, name)
	if err != nil {
		return pandastack.Template{}, err
	}
	var v *pandastack.TemplateVersion
	switch {
	case id != "":
		for i := range vs {
			if vs[i].ID == id {
				v = &vs[i]
			}
		}
		if v == nil {
			return pandastack.Template{}, pandastack.Errorf(pandastack.ENotFound, "template %s has no build %s", name, id)
		}
	case tag == "" || tag == LatestTag:
		v = &vs[len(vs)-1]
	default:
		n, numErr := strconv.Atoi(strings.TrimPrefix(tag, "v"))
		for i := range vs {
			if (numErr == nil && vs[i].Version == n) || slices.Contains(vs[i].Tags, tag) {
				v = &vs[i]
				break
			}
		}
		if v == nil {
			return pandastack.Template{}, pandastack.Errorf(pandastack.ENotFound, "template %s has no version or tag %q", name, tag)
		}
	}
	return pandastack.Template{TeamID: owner, Name: name, ID: v.ID, Version: v.Version, CPUs: v.CPUs,
		MemoryMiB: v.MemoryMiB, DiskMiB: v.DiskMiB, BuiltAt: v.BuiltAt}, nil
}

// List returns the templates a team sees: its own and the public ones, by
// name (a team's own before a public one of the same name).
func (r *Registry) List(ctx context.Context, teamID string) ([]pandastack.Template, error) {
	out, err := r.cfg.Store.ListTemplates(ctx, "")
	if err != nil {
		return nil, err
	}
	if teamID != "" {
		own, err := r.cfg.Store.ListTemplates(ctx, teamID)
		if err != nil {
			return nil, err
		}
		out = append(own, out...)
	}
	slices.SortStableFunc(out, func(a, b pandastack.Template) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Versions lists the versions of the template name the team sees, oldest
// first.
func (r *Registry) Versions(ctx context.Context, teamID, name string) ([]pandastack.TemplateVersion, error) {
	if !ValidName(name) {
		return nil, notFound(name)
	}
	_, vs, err := r.versions(ctx, teamID, name)
	return vs, err
}

// VersionOf returns the version number of build id of the template name a
// team sees (0 when it is none of its versions: a size variant, or a build
// since replaced).
func (r *Registry) VersionOf(ctx context.Context, teamID, name, id string) int {
	_, vs, err := r.versions(ctx, teamID, name)
	if err != nil {
		return 0
	}
	for _, v := range slices.Backward(vs) {
		if v.ID == id {
			return v.Version
		}
	}
	return 0
}

// reserved says whether a team may not name a custom template name: the
// catalog's names and every public template's are reserved.
func (r *Registry) reserved(ctx context.Context, name string) (bool, error) {
	if slices.Contains(r.cfg.Catalog, name) {
		return true, nil
	}
	vs, err := r.cfg.Store.ListTemplateVersions(ctx, "", name)
	return len(vs) > 0, err
}
