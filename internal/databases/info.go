package databases

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/pgrouter"
)

// States GET reports: a ready database is as its machine is.
const (
	StateCreating   = "creating"
	StateRunning    = "running"
	StateHibernated = "hibernated"
	// StateStopped: its machine is gone (killed outside the database
	// API); only DELETE is left.
	StateStopped = "stopped"
)

// Info is a database as the API shows it.
type Info struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	State     string `json:"state"`
	Host      string `json:"host"`
	Port      int    `json:"port"`
	User      string `json:"user"`
	Password  string `json:"password,omitempty"`
	Database  string `json:"database"`
	MachineID string `json:"machine_id"`
	// VolumeID is the durable volume its data lives on.
	VolumeID string `json:"volume_id,omitempty"`
	// AutoHibernateSeconds is scale to zero: with no client connection
	// for that long the database hibernates (0: never).
	AutoHibernateSeconds int       `json:"auto_hibernate_seconds"`
	CreatedAt            time.Time `json:"created_at"`
	// ConnectionURI is postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=require.
	ConnectionURI string `json:"connection_uri,omitempty"`
	// PooledConnectionURI is the same through PgBouncer in the machine
	// (transaction pooling): host <id>-pooler.<domain>.
	PooledConnectionURI string `json:"pooled_connection_uri,omitempty"`
	// HTTPURL is SQL over HTTP (Neon's /sql wire): give it to the
	// @neondatabase/serverless driver as neonConfig.fetchEndpoint.
	HTTPURL string `json:"http_url,omitempty"`
}

// validName is a database's name: it is also its PostgreSQL database
// name, and with "_owner" its role's.
var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,39}$`)

func checkName(name string) error {
	if !validName.MatchString(name) {
		return pandastack.Errorf(pandastack.EInvalid, "name %q: use 1 to 40 lower-case letters, digits, '_' or '-', starting with a letter", name)
	}
	return nil
}

// connectionURI is the libpq URI of a database.
func connectionURI(user, password, host string, port int, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: host + ":" + strconv.Itoa(port),
		Path: "/" + db, RawQuery: "sslmode=require"}
	return u.String()
}

// info presents d; password is "" when it is not to be shown.
func (s *Service) info(d pandastack.Database, state, password string) Info {
	_, port := s.router()
	in := Info{ID: d.ID, Name: d.Name, State: state, Host: pgrouter.Host(d.ID, s.cfg.Domain), Port: port,
		User: d.User, Database: d.DBName, MachineID: d.MachineID, VolumeID: d.VolumeID, CreatedAt: d.CreatedAt, HTTPURL: s.sqlURL()}
	if password != "" {
		in.Password = password
		in.ConnectionURI = connectionURI(d.User, password, in.Host, port, d.DBName)
		in.PooledConnectionURI = connectionURI(d.User, password, pgrouter.Host(d.ID+PoolerSuffix, s.cfg.Domain), port, d.DBName)
	}
	return in
}

// password opens d's sealed password.
func (s *Service) password(d pandastack.Database) (string, error) {
	p, err := s.cfg.Secrets.Open(d.PasswordSealed, passwordAAD(d.ID))
	if err != nil {
		return "", fmt.Errorf("open password of database %s: %w", d.ID, err)
	}
	return p, nil
}

// passwordAAD binds a sealed password to its record.
func passwordAAD(id string) string { return "db:" + id + ":password" }
