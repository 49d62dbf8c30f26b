package cli

import (
	"context"
	"fmt"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// The stateful operations: fork, snapshot, hibernate, wake, and the
// snapshot commands.

func runSandboxFork(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox fork", "ID", "Make copy-on-write children of a running sandbox (it runs on); prints their ids.").withClient(ctx)
	count := p.fs.Int("count", 1, "how many children (1-10)")
	asJSON := p.fs.Bool("json", false, "print the children as JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	kids, err := p.client.client().Sandbox(pos[0]).ForkN(ctx, *count)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, kids)
		return 0
	}
	for _, k := range kids {
		fmt.Fprintln(s.out, k.ID)
	}
	return 0
}

func runSandboxSnapshot(ctx context.Context, s *streams, args []string) int {
	p := newParser("sandbox snapshot", "ID", "Save a running sandbox whole (memory, processes, disk); it runs on. Prints the snapshot's id;\n"+
		"start sandboxes from it with 'sandbox create --snapshot ID'.").withClient(ctx)
	name := p.fs.String("name", "", "a name, unique in the team (default: the snapshot's id)")
	asJSON := p.fs.Bool("json", false, "print the snapshot as JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	sn, err := p.client.client().Sandbox(pos[0]).Snapshot(ctx, *name)
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

// runSandboxSleep is `sandbox hibernate` and `sandbox wake`.
func runSandboxSleep(wake bool) func(context.Context, *streams, []string) int {
	name, help := "sandbox hibernate", "Save a sandbox whole and free its memory and CPU; any use wakes it. Prints its state."
	if wake {
		name, help = "sandbox wake", "Bring a hibernated sandbox back exactly as it was. Prints its state."
	}
	return func(ctx context.Context, s *streams, args []string) int {
		p := newParser(name, "ID", help).withClient(ctx)
		pos, code, ok := p.parse(s, args, 1)
		if !ok {
			return code
		}
		sb := p.client.client().Sandbox(pos[0])
		op := sb.Hibernate
		if wake {
			op = sb.Wake
		}
		if err := op(ctx); err != nil {
			return fail(s, err)
		}
		fmt.Fprintln(s.out, sb.State)
		return 0
	}
}

func snapshotCommands() []command {
	return []command{
		{"ls", "list the team's snapshots", runSnapshotList},
		{"delete", "delete a snapshot (sandboxes made from it are not affected)", runSnapshotDelete},
		{"export", "export a snapshot to the server's object storage", runSnapshotExport},
		{"import", "make a snapshot from an export in object storage", runSnapshotImport},
	}
}

func runSnapshotList(ctx context.Context, s *streams, args []string) int {
	p := newParser("snapshot ls", "", "List the team's snapshots, oldest first.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListSnapshots(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.SnapshotInfo{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "ID", "NAME", "SANDBOX", "TEMPLATE", "SIZE", "CREATED")
	for _, sn := range list {
		t.row(sn.ID, sn.Name, sn.SandboxID, sn.Template, fmt.Sprintf("%d MiB", sn.SizeBytes>>20), when(sn.CreatedAt))
	}
	t.flush()
	return 0
}

func runSnapshotDelete(ctx context.Context, s *streams, args []string) int {
	p := newParser("snapshot delete", "ID", "Delete a snapshot. Sandboxes made from it are not affected.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().DeleteSnapshot(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	return 0
}
