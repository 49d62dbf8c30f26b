package apitest

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pandastack/pandastack"
)

// Builder is a FAKE pandastack.TemplateBuilder: it writes Lines to the log,
// then records a template in the Store (or returns Fail's error).
type Builder struct {
	Store *Store
	Lines []string
	// Fail, when set, decides whether building name fails (after the lines).
	Fail func(name string) error
}

var _ pandastack.TemplateBuilder = (*Builder)(nil)

// NewBuilder returns a fake builder recording into store.
func NewBuilder(store *Store) *Builder {
	return &Builder{Store: store, Lines: []string{"resolving inputs", "baking snapshot"}}
}

func (b *Builder) Build(ctx context.Context, name string, log io.Writer) (pandastack.Template, error) {
	for _, l := range b.Lines {
		if _, err := fmt.Fprintln(log, l); err != nil {
			return pandastack.Template{}, err
		}
	}
	if b.Fail != nil {
		if err := b.Fail(name); err != nil {
			return pandastack.Template{}, err
		}
	}
	t := pandastack.Template{
		Name: name, ID: randomID("tpl_"), CPUs: 1, MemoryMiB: 512, DiskMiB: 2048,
		Accel: pandastack.AccelTCG, BuiltAt: time.Now().UTC().Truncate(time.Millisecond), BuildMs: 42,
	}
	return t, b.Store.PutTemplate(ctx, t)
}
