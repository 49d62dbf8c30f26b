package pandastack

import (
	"context"
	"net/url"
	"time"
)

// Database is a managed PostgreSQL database: its own service machine,
// reached at Host:Port (TLS; the host name routes it) with its own role.
type Database struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	State     string `json:"state"` // creating, running, hibernated or stopped
	Host      string `json:"host"`  // <id>.<db domain>: the TLS SNI name
	Port      int    `json:"port"`
	User      string `json:"user"`
	Password  string `json:"password,omitempty"` // create and get only
	Database  string `json:"database"`
	MachineID string `json:"machine_id"`
	// VolumeID is the durable volume its data lives on.
	VolumeID string `json:"volume_id,omitempty"`
	// AutoHibernateSeconds: with no client connection for that long the
	// database hibernates; the next connection wakes it (0: never).
	AutoHibernateSeconds int       `json:"auto_hibernate_seconds"`
	CreatedAt            time.Time `json:"created_at"`
	// ConnectionURI is postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=require
	// (create and get only).
	ConnectionURI string `json:"connection_uri,omitempty"`
	// PooledConnectionURI goes through PgBouncer in the database's machine
	// (transaction pooling; host <id>-pooler.<db domain>). Use
	// ConnectionURI for migrations, pg_dump, LISTEN/NOTIFY and session
	// settings.
	PooledConnectionURI string `json:"pooled_connection_uri,omitempty"`
	// HTTPURL is SQL over HTTP (Neon's /sql wire), for the
	// @neondatabase/serverless driver's neonConfig.fetchEndpoint.
	HTTPURL string `json:"http_url,omitempty"`
}

// CreateDatabaseParams is a database to create.
type CreateDatabaseParams struct {
	Name string `json:"name"`
	// AutoHibernateSeconds, when above 0, is scale to zero: with no client
	// connection for that long the database hibernates, and the next
	// connection wakes it.
	AutoHibernateSeconds int `json:"auto_hibernate_seconds,omitempty"`
	// SizeMiB is the database's volume, where its data lives (0: the
	// server's default).
	SizeMiB int `json:"size_mib,omitempty"`
}

// CreateDatabase makes a database and returns once a query through the
// server's database router answered. A taken name fails with code
// "conflict" (409).
func (c *Client) CreateDatabase(ctx context.Context, p CreateDatabaseParams) (*Database, error) {
	body := p
	d := &Database{}
	if err := c.do(ctx, request{method: "POST", path: "/v1/databases", body: body}, d); err != nil {
		return nil, err
	}
	return d, nil
}

// ListDatabases lists the team's databases, oldest first, without
// credentials.
func (c *Client) ListDatabases(ctx context.Context) ([]Database, error) {
	var out struct {
		Databases []Database `json:"databases"`
	}
	err := c.do(ctx, request{method: "GET", path: "/v1/databases"}, &out)
	return out.Databases, err
}

// GetDatabase fetches a database (by id or name) with its credentials.
func (c *Client) GetDatabase(ctx context.Context, idOrName string) (*Database, error) {
	return c.databaseCall(ctx, "GET", idOrName, "")
}

// DeleteDatabase removes a database: its machine, its data and its route.
func (c *Client) DeleteDatabase(ctx context.Context, idOrName string) error {
	return c.do(ctx, request{method: "DELETE", path: "/v1/databases/" + url.PathEscape(idOrName)}, nil)
}

// HibernateDatabase saves the database's machine to disk; the next
// connection (or WakeDatabase) brings it back.
func (c *Client) HibernateDatabase(ctx context.Context, idOrName string) (*Database, error) {
	return c.databaseCall(ctx, "POST", idOrName, "/hibernate")
}

// WakeDatabase brings a hibernated database back.
func (c *Client) WakeDatabase(ctx context.Context, idOrName string) (*Database, error) {
	return c.databaseCall(ctx, "POST", idOrName, "/wake")
}

// ForkDatabase copies a running database (by id or name) into a new one
// named name: memory and data copy-on-write, the parent keeps serving.
// The fork has its own password (the parent's does not open it) and
// returns, like CreateDatabase, once a query through the router answered.
func (c *Client) ForkDatabase(ctx context.Context, idOrName, name string) (*Database, error) {
	d := &Database{}
	body := map[string]string{"name": name}
	if err := c.do(ctx, request{method: "POST", path: "/v1/databases/" + url.PathEscape(idOrName) + "/fork", body: body}, d); err != nil {
		return nil, err
	}
	return d, nil
}

func (c *Client) databaseCall(ctx context.Context, method, idOrName, suffix string) (*Database, error) {
	d := &Database{}
	if err := c.do(ctx, request{method: method, path: "/v1/databases/" + url.PathEscape(idOrName) + suffix}, d); err != nil {
		return nil, err
	}
	return d, nil
}
