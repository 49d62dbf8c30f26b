package pandastack

import "time"

// Database states a record moves through (internal/databases).
const (
	// DatabaseCreating: its machine is being started and set up; a server
	// that finds one at start removes it (the create never answered).
	DatabaseCreating = "creating"
	// DatabaseReady: set up and routed; its machine may be running or
	// hibernated (what GET reports comes from the machine).
	DatabaseReady = "ready"
)

// Database is a managed PostgreSQL database: a service machine from the
// postgres template owned by a team, reached through the database router.
type Database struct {
	ID        string
	TeamID    string
	Name      string // unique in the team
	State     string // DatabaseCreating or DatabaseReady
	MachineID string // the service machine (a sandbox id)
	User      string // the tenant's role
	// PasswordSealed is the role's password sealed by internal/secrets
	// (aad "db:ID:password"); never the plain text.
	PasswordSealed string
	DBName         string
	CreatedAt      time.Time
	// VolumeID is the durable volume PGDATA lives on ("" until made).
	VolumeID string
}
