package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func fsCommands() []command {
	return []command{
		{"read", "write a file's bytes to stdout", runFsRead},
		{"write", "write a file from a local file or stdin", runFsWrite},
		{"ls", "list a directory", runFsList},
		{"rm", "remove a file or directory", runFsRemove},
		{"mkdir", "create a directory (and parents)", runFsMkdir},
	}
}

func runFsRead(ctx context.Context, s *streams, args []string) int {
	p := newParser("fs read", "ID PATH", "Write the bytes of the file PATH in sandbox ID to stdout.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	if _, err := p.client.client().Sandbox(pos[0]).Files().ReadTo(ctx, pos[1], s.out); err != nil {
		return fail(s, err)
	}
	return 0
}

func runFsWrite(ctx context.Context, s *streams, args []string) int {
	p := newParser("fs write", "ID PATH [FILE|-]",
		"Create or replace the file PATH in sandbox ID with the contents of the local FILE\n"+
			"(default -, stdin), streamed.").withClient(ctx)
	mode := p.fs.String("mode", "0644", "permission bits, octal")
	pos, code, ok := p.parse(s, args, -1)
	if !ok {
		return code
	}
	if len(pos) != 2 && len(pos) != 3 {
		return p.usageError(s, "need ID, PATH and optionally FILE")
	}
	perm, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil || perm > 0o777 {
		return p.usageError(s, fmt.Sprintf("--mode must be octal permission bits such as 0644, got %q", *mode))
	}
	var src io.Reader = s.in
	if len(pos) == 3 && pos[2] != "-" {
		f, err := os.Open(pos[2])
		if err != nil {
			return fail(s, err)
		}
		defer f.Close()
		src = f
	}
	if _, err := p.client.client().Sandbox(pos[0]).Files().WriteFrom(ctx, pos[1], src, fs.FileMode(perm)); err != nil {
		return fail(s, err)
	}
	return 0
}

func runFsList(ctx context.Context, s *streams, args []string) int {
	p := newParser("fs ls", "ID PATH", "List the directory PATH in sandbox ID.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	entries, err := p.client.client().Sandbox(pos[0]).Files().List(ctx, pos[1])
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if entries == nil {
			entries = []sdk.FileInfo{}
		}
		printJSON(s.out, entries)
		return 0
	}
	t := newTable(s.out, "MODE", "SIZE", "MODIFIED", "NAME")
	for _, e := range entries {
		name, kind := e.Name, "-"
		if e.IsDir {
			name, kind = name+"/", "d"
		}
		t.row(kind+e.Perm().String()[1:], strconv.FormatInt(e.Size, 10), when(e.ModTime), name)
	}
	t.flush()
	return 0
}

func runFsRemove(ctx context.Context, s *streams, args []string) int {
	p := newParser("fs rm", "ID PATH", "Remove a file or an empty directory; with -r, a directory and its contents.").withClient(ctx)
	recursive := p.fs.Bool("r", false, "remove directories and their contents")
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	if err := p.client.client().Sandbox(pos[0]).Files().Remove(ctx, pos[1], *recursive); err != nil {
		return fail(s, err)
	}
	return 0
}

func runFsMkdir(ctx context.Context, s *streams, args []string) int {
	p := newParser("fs mkdir", "ID PATH", "Create the directory PATH (and any missing parents) in sandbox ID.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 2)
	if !ok {
		return code
	}
	if err := p.client.client().Sandbox(pos[0]).Files().MakeDir(ctx, pos[1]); err != nil {
		return fail(s, err)
	}
	return 0
}
