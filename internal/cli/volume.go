package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

func volumeCommands() []command {
	return []command{
		{"create", "create a durable volume and print its id", runVolumeCreate},
		{"ls", "list volumes", runVolumeList},
		{"get", "show a volume as JSON", runVolumeGet},
		{"delete", "delete a volume and its data", runVolumeDelete},
	}
}

func runVolumeCreate(ctx context.Context, s *streams, args []string) int {
	p := newParser("volume create", "NAME", "Create an empty durable volume (ext4) and print its id. Mount it with\n'pandastack sandbox create --volume NAME:/path'.").withClient(ctx)
	size := p.fs.Int("size", 1024, "size in MiB (16 to 1048576)")
	asJSON := p.fs.Bool("json", false, "print the volume as JSON")
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	v, err := p.client.client().CreateVolume(ctx, pos[0], *size)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		printJSON(s.out, v)
	} else {
		fmt.Fprintln(s.out, v.ID)
	}
	return 0
}

func runVolumeList(ctx context.Context, s *streams, args []string) int {
	p := newParser("volume ls", "", "List the team's volumes and the sandbox each is attached to.").withClient(ctx)
	asJSON := p.fs.Bool("json", false, "print JSON")
	if _, code, ok := p.parse(s, args, 0); !ok {
		return code
	}
	list, err := p.client.client().ListVolumes(ctx)
	if err != nil {
		return fail(s, err)
	}
	if *asJSON {
		if list == nil {
			list = []sdk.Volume{}
		}
		printJSON(s.out, list)
		return 0
	}
	t := newTable(s.out, "ID", "NAME", "SIZE", "SANDBOX", "PATH", "CREATED")
	for _, v := range list {
		sb := v.SandboxID
		if sb == "" {
			sb = "-"
		}
		t.row(v.ID, v.Name, strconv.Itoa(v.SizeMiB)+" MiB", sb, v.MountPath, when(v.CreatedAt))
	}
	t.flush()
	return 0
}

func runVolumeGet(ctx context.Context, s *streams, args []string) int {
	p := newParser("volume get", "ID|NAME", "Show a volume as JSON.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	v, err := p.client.client().GetVolume(ctx, pos[0])
	if err != nil {
		return fail(s, err)
	}
	printJSON(s.out, v)
	return 0
}

func runVolumeDelete(ctx context.Context, s *streams, args []string) int {
	p := newParser("volume delete", "ID|NAME", "Delete a volume and its data. A volume attached to a live sandbox is refused.").withClient(ctx)
	pos, code, ok := p.parse(s, args, 1)
	if !ok {
		return code
	}
	if err := p.client.client().DeleteVolume(ctx, pos[0]); err != nil {
		return fail(s, err)
	}
	return 0
}

// volumeFlag collects --volume NAME:/path (repeatable).
type volumeFlag struct{ mounts *[]sdk.VolumeMount }

func (f volumeFlag) String() string {
	if f.mounts == nil {
		return ""
	}
	var parts []string
	for _, m := range *f.mounts {
		parts = append(parts, m.Volume+":"+m.Path)
	}
	return strings.Join(parts, ",")
}

func (f volumeFlag) Set(s string) error {
	name, path, ok := strings.Cut(s, ":")
	if !ok || name == "" || !strings.HasPrefix(path, "/") {
		return fmt.Errorf("want NAME:/path (a volume's name or id, an absolute mount path), got %q", s)
	}
	*f.mounts = append(*f.mounts, sdk.VolumeMount{Volume: name, Path: path})
	return nil
}
