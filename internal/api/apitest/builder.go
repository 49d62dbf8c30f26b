package apitest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// Builder is a FAKE host builder (registry.Builder): a build writes Lines
// to the log and returns a template (or Fail's error). A custom build reads
// the spec from the uploaded tar, resolves its FROM line through the
// registry's rule and "bakes" nothing: its build ID hashes the team, the
// name and the spec, so an unchanged rebuild is the same build.
type Builder struct {
	Lines []string
	// Fail, when set, decides whether building name fails (after the lines).
	Fail func(name string) error
	// Block, when set, holds every custom build until it is closed.
	Block chan struct{}
}

var (
	_ pandastack.TemplateBuilder = (*Builder)(nil)
	_ registry.Builder           = (*Builder)(nil)
)

// NewBuilder returns a fake builder.
func NewBuilder() *Builder {
	return &Builder{Lines: []string{"resolving inputs", "baking snapshot"}}
}

func (b *Builder) Build(ctx context.Context, name string, log io.Writer) (pandastack.Template, error) {
	if err := b.lines(name, log); err != nil {
		return pandastack.Template{}, err
	}
	return pandastack.Template{
		Name: name, ID: randomID("tpl_"), CPUs: 1, MemoryMiB: 512, DiskMiB: 2048,
		Accel: pandastack.AccelTCG, BuiltAt: time.Now().UTC().Truncate(time.Millisecond), BuildMs: 42,
	}, nil
}

func (b *Builder) lines(name string, log io.Writer) error {
	for _, l := range b.Lines {
		if _, err := fmt.Fprintln(log, l); err != nil {
			return err
		}
	}
	if b.Fail != nil {
		return b.Fail(name)
	}
	return nil
}

func (b *Builder) BuildFromTar(ctx context.Context, req pandastack.CustomBuild, r io.Reader, log io.Writer) (pandastack.Template, error) {
	spec, err := specOf(r)
	if err != nil {
		return pandastack.Template{}, err
	}
	first, _, _ := strings.Cut(spec, "\n")
	from, ok := strings.CutPrefix(first, "FROM ")
	if !ok {
		return pandastack.Template{}, pandastack.Errorf(pandastack.EInvalid, "spec line 1: FROM must come first")
	}
	if _, err := req.ResolveFrom(ctx, strings.TrimSpace(from)); err != nil {
		return pandastack.Template{}, pandastack.Errorf(pandastack.ErrorCode(err), "spec line 1: FROM %s: %s", from, pandastack.ErrorMessage(err))
	}
	runLog, err := req.Run.Start(ctx)
	if err != nil {
		return pandastack.Template{}, err
	}
	out := io.MultiWriter(log, runLog)
	if b.Block != nil {
		select {
		case <-b.Block:
		case <-ctx.Done():
			return pandastack.Template{}, ctx.Err()
		}
	}
	if err := b.lines(req.Name, out); err != nil {
		return pandastack.Template{}, err
	}
	req.Run.Step(pandastack.BuildStep{Number: 1, Instruction: "bake", DurationMs: 1})
	h := sha256.Sum256([]byte(req.TeamID + "\x00" + req.Name + "\x00" + spec))
	return pandastack.Template{
		Name: req.Name, ID: hex.EncodeToString(h[:12]), CPUs: 1, MemoryMiB: 512, DiskMiB: 2048,
		Accel: pandastack.AccelTCG, BuiltAt: time.Now().UTC().Truncate(time.Millisecond), BuildMs: 7,
	}, nil
}

// specOf reads the spec entry of an uploaded build context.
func specOf(r io.Reader) (string, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", pandastack.Errorf(pandastack.EInvalid, "the build context carries no spec file")
		}
		if err != nil {
			return "", pandastack.Errorf(pandastack.EInvalid, "read build context: %v", err)
		}
		if h.Name == ".pandastack-spec" {
			var buf bytes.Buffer
			if _, err := io.Copy(&buf, tr); err != nil {
				return "", err
			}
			// Read the upload to its end, as a real build does: a handler
			// that leaves a request body unread may have its request
			// cancelled under it.
			_, err := io.Copy(io.Discard, r)
			return buf.String(), err
		}
	}
}
