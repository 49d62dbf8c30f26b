package cli

import (
	"context"
	"fmt"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// dbCommands: `pandastack db ...`, managed PostgreSQL databases.
func dbCommands() []command {
	return []command{
		{"create", "create a database and print its connection URI", runDBCreate},
		{"ls", "list databases", runDBList},
		{"get", "show a database, with its credentials, as JSON", runDBGet},
		{"rm", "delete a database, its machine and its data", runDBRemove},
		{"hibernate", "save a database's machine to disk (a connection wakes it)", runDBHibernate},
		{"wake", "bring a hibernated database back", runDBWake},
		{"fork", "copy a running database into a new one and print its connection URI", runDBFork},
		{"backups", "list a database's base backups and WAL archive", runDBBackups},
		{"backup", "take a base backup of a database now", runDBBackup},
		{"restore", "restore a database to a point in time as a new one", runDBRestore},
	}
}

func runDBCreate(ctx context.Context, s *streams, args []string) int {
	p := newParser("db create", "NAME", "Create a PostgreSQL 17 database (pgvector and more extensions) and print its\n"+
		"connection URI once a query through the server's database router answered.\n"+
		"Clients that send no TLS SNI add options=endpoint%3DID to the URI.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print the database as JSON")
	idle := p.fs.Duration("auto-hibernate", 0, "scale to zero: hibernate after this long without a client connection (e.g. 5m; default never)")
	size := p.fs.Int("size", 0, "the database's volume in MiB, where its data and WAL live (default 1024)")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	d, err := p.client.client().CreateDatabase(ctx, sdk.CreateDatabaseParams{Name: pos[0], AutoHibernateSeconds: int(idle.Seconds()), SizeMiB: *size})
	if err != nil {
		return fail(s, err)
	}
	printDatabase(s, d, *asJSON)
	return 0
}

func runDBList(ctx context.Context, s *streams, args []string) int {
	p := newParser("db ls", "", "List the team's databases.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListDatabases(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.Database{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "ID", "NAME", "STATE", "HOST", "PORT", "CREATED")
	for _, d := range list {
		t.row(d.ID, d.Name, d.State, d.Host, fmt.Sprint(d.Port), when(d.CreatedAt))
	}
	t.flush()
	return 0
}

// dbOne runs a call on one database (ID or NAME) and prints it as JSON.
func dbOne(ctx context.Context, s *streams, args []string, name, help string,
	call func(*sdk.Client, context.Context, string) (*sdk.Database, error)) int {
	p := newParser("db "+name, "ID|NAME", help).withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	d, err := call(p.client.client(), ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	printJSON(s.out, d)
	return 0
}

func runDBGet(ctx context.Context, s *streams, args []string) int {
	return dbOne(ctx, s, args, "get", "Show a database as JSON, with its password and connection URI.", (*sdk.Client).GetDatabase)
}

func runDBHibernate(ctx context.Context, s *streams, args []string) int {
	return dbOne(ctx, s, args, "hibernate", "Save a database's machine to disk and free its memory; the next\nconnection (or 'db wake') brings it back with its caches.", (*sdk.Client).HibernateDatabase)
}

func runDBWake(ctx context.Context, s *streams, args []string) int {
	return dbOne(ctx, s, args, "wake", "Bring a hibernated database back.", (*sdk.Client).WakeDatabase)
}

func runDBRemove(ctx context.Context, s *streams, args []string) int {
	p := newParser("db rm", "ID|NAME", "Delete a database: its machine, its data and its route.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().DeleteDatabase(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	return 0
}

// printDatabase prints a database just made (created, forked, restored):
// whole as JSON, or its connection URI.
func printDatabase(s *streams, d *sdk.Database, asJSON bool) {
	if asJSON {
		printJSON(s.out, d)
		return
	}
	fmt.Fprintln(s.out, d.ConnectionURI)
}
