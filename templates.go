package pandastack

import "context"

// CommandDefaults are what every command in a sandbox starts with unless the
// request says otherwise: a custom template's ENV, WORKDIR and USER.
type CommandDefaults struct {
	Env     map[string]string `json:"env,omitempty"`
	Workdir string            `json:"workdir,omitempty"`
	User    string            `json:"user,omitempty"`
}

// TemplateStore is the template registry's part of the Store: each team's
// templates and the public catalog (TeamID ""), their numbered versions and
// tags, and their build runs. A template is named within its team: the same
// name in two teams is two templates that share nothing. Tag "latest" is not
// stored: it always names the newest version.
type TemplateStore interface {
	// AddTemplateVersion records build t (of template t.TeamID/t.Name) as
	// the template's newest version, numbered one past the newest, unless
	// t.ID already is the newest's build (then nothing new is recorded).
	// With t.Version above 0 it records exactly that number (an import): if
	// the number is taken by another build it fails with EConflict, by the
	// same build it only tags. Tag, unless "" or "latest", is moved onto the
	// version (a tag names one version of a template). It returns the
	// version's template, Version set. EInvalid for an empty name or build.
	AddTemplateVersion(ctx context.Context, t Template, buildID, tag string) (Template, error)
	// GetTemplate returns the newest version of a team's template
	// (ENotFound if it has none).
	GetTemplate(ctx context.Context, teamID, name string) (Template, error)
	// ListTemplates returns the newest version of each of the team's
	// templates (only that team's: "" lists the public catalog), by name.
	ListTemplates(ctx context.Context, teamID string) ([]Template, error)
	// ListTemplateVersions lists a team's template's versions, oldest
	// first, each with its tags; empty (not nil) when it has none.
	ListTemplateVersions(ctx context.Context, teamID, name string) ([]TemplateVersion, error)
	// DeleteTemplate removes a team's template: its versions and tags (its
	// build runs stay). ENotFound if it has no version.
	DeleteTemplate(ctx context.Context, teamID, name string) error

	// PutTemplateBuild inserts a build run or replaces the one with its id.
	PutTemplateBuild(ctx context.Context, b TemplateBuild) error
	// GetTemplateBuild returns a build run by id (ENotFound if none).
	GetTemplateBuild(ctx context.Context, id string) (TemplateBuild, error)
	// ListTemplateBuilds lists a team's template's build runs, newest first.
	ListTemplateBuilds(ctx context.Context, teamID, name string) ([]TemplateBuild, error)
}
