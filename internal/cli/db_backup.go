package cli

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func runDBBackups(ctx context.Context, s *streams, args []string) int {
	p := newParser("db backups", "ID|NAME", "List a database's base backups, oldest first, and where its continuous WAL\n"+
		"archive stands (a restore reaches any moment from the first backup's end, but\n"+
		"none inside a gap in the archive, which it lists).").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	l, err := p.client.client().ListDatabaseBackups(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, l)
		return 0
	}
	t := newTable(s.out, "ID", "STATE", "STARTED", "SIZE", "START LSN", "VERIFIED")
	for _, b := range l.Backups {
		t.row(b.ID, b.State, when(b.StartedAt), fmt.Sprint(b.SizeBytes), b.StartLSN, fmt.Sprint(b.Verified))
	}
	t.flush()
	if l.WAL.ArchivedAt != nil {
		fmt.Fprintf(s.out, "WAL archived through %s (segment %s) at %s\n", l.WAL.ArchivedThroughLSN, l.WAL.LastSegment, when(*l.WAL.ArchivedAt))
	}
	if l.EarliestRestoreTime != nil {
		fmt.Fprintf(s.out, "earliest restore time: %s\n", l.EarliestRestoreTime.UTC().Format(time.RFC3339))
	}
	for _, g := range l.RestoreGaps {
		until := "no base backup has ended since"
		if g.Until != nil {
			until = g.Until.UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(s.out, "no restore reaches from %s until %s (a gap in the WAL archive)\n", g.From.UTC().Format(time.RFC3339Nano), until)
	}
	return 0
}

func runDBBackup(ctx context.Context, s *streams, args []string) int {
	p := newParser("db backup", "ID|NAME", "Take a base backup of a running database now and print it as JSON\n"+
		"once it is in object storage.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	b, err := p.client.client().BackupDatabase(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	printJSON(s.out, b)
	return 0
}

func runDBRestore(ctx context.Context, s *streams, args []string) int {
	p := newParser("db restore", "ID|NAME NEW-NAME TIME", "Make database NEW-NAME from a database's backups as it was at TIME (RFC 3339,\n"+
		"e.g. 2026-11-24T10:30:00Z) and print its connection URI. It has its own password.\n"+
		"A database whose volume filled is restored into a bigger one with --size.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print the new database as JSON")
	size := p.fs.Int("size", 0, "the new database's volume in MiB, at least the source's (default the source's)")
	pos, code, ok := p.parse(s, args, 3)
	if !ok {
		return code
	}
	at, err := time.Parse(time.RFC3339Nano, pos[2])
	if err != nil {
		fmt.Fprintf(s.err, "pandastack: TIME %q is not an RFC 3339 time (e.g. 2026-11-24T10:30:00Z)\n", pos[2])
		return 2
	}
	d, err := p.client.client().RestoreDatabaseWith(ctx, pos[0], sdk.RestoreDatabaseParams{Name: pos[1], TargetTime: at, SizeMiB: *size})
	if err != nil {
		return fail(s, err)
	}
	printDatabase(s, d, *asJSON)
	return 0
}
