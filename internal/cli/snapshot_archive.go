package cli

import (
	"context"
	"fmt"
)

// runSnapshotExport: `pandastack snapshot export ID`.
func runSnapshotExport(ctx context.Context, s *streams, args []string) int {
	p := newParser("snapshot export", "ID", "Export a snapshot (memory, disk, device state, machine, checksums) to the server's object\n"+
		"storage (--object-store). Prints the export's key, which 'snapshot import KEY' takes, here or\n"+
		"on another server sharing the store.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print the snapshot as JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	sn, err := p.client.client().ExportSnapshot(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, sn)
	} else {
		fmt.Fprintln(s.out, sn.ObjectKey)
	}
	return 0
}

// runSnapshotImport: `pandastack snapshot import KEY`.
func runSnapshotImport(ctx context.Context, s *streams, args []string) int {
	p := newParser("snapshot import", "KEY", "Make a snapshot of your team from the export at KEY (snapshots/ID) in the server's object\n"+
		"storage; every file's checksum is verified first. Prints the snapshot's id.").withClient(ctx)
	name := p.fs.String("name", "", "a name, unique in the team (default: the exported name)")
	asJSON := p.fs.Bool("json", false, "print the snapshot as JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	sn, err := p.client.client().ImportSnapshot(ctx, pos[0], *name)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, sn)
	} else {
		fmt.Fprintln(s.out, sn.ID)
	}
	return 0
}
