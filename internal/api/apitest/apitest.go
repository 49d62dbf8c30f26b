// Package apitest holds FAKES for testing the HTTP layer (internal/api, the
// Go SDK, the CLI) without VMs: an in-memory Store, an Engine whose
// "sandboxes" are records plus a fake Guest (an in-memory file system and a
// toy command interpreter), and a TemplateBuilder that only logs. They model
// the contracts of the real implementations closely enough to exercise HTTP
// behaviour; they isolate nothing and must never back a real server. The
// real-VM integration suite lives elsewhere.
package apitest

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/api"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// Env is a running API server backed by the fakes, with keys for three
// teams: "admin" (an admin key), "acme" and "globex".
type Env struct {
	Store     *Store
	Engine    *Engine
	Builder   *Builder
	Templates *registry.Registry // the real registry, over Store and Builder
	Server    *httptest.Server
	URL       string // Server.URL

	AdminKey string // admin key of team "admin"
	Key      string // key of team "acme"
	OtherKey string // key of team "globex"
	KeyID    string // id of Key

	Logs *SyncBuffer // the server's slog output (text)
}

// Start runs a fake-backed server for the duration of the test. The store
// holds template "base" (public). configure, if given, may adjust the
// Config.
func Start(t testing.TB, configure ...func(*api.Config)) *Env {
	t.Helper()
	ctx := context.Background()
	e := &Env{Store: NewStore(), Logs: &SyncBuffer{}}
	e.Engine = NewEngine(e.Store)
	e.Builder = NewBuilder()
	e.Templates = registry.New(registry.Config{Store: e.Store, Builder: e.Builder, LogDir: t.TempDir(),
		Catalog: []string{"base", "code-interpreter"}})
	t.Cleanup(func() { e.Store.Close() })
	if _, err := e.Store.AddTemplateVersion(ctx, pandastack.Template{
		Name: "base", ID: "tpl_base", CPUs: 1, MemoryMiB: 512, DiskMiB: 2048,
		Accel: pandastack.AccelTCG, BuiltAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), BuildMs: 1234,
	}, "", ""); err != nil {
		t.Fatal(err)
	}
	var err error
	var created bool
	if e.AdminKey, created, err = api.Bootstrap(ctx, e.Store); err != nil || !created {
		t.Fatalf("bootstrap: created=%v err=%v", created, err)
	}
	var k pandastack.APIKey
	if e.Key, k, err = api.CreateKey(ctx, e.Store, "acme", "test", false); err != nil {
		t.Fatal(err)
	}
	e.KeyID = k.ID
	if e.OtherKey, _, err = api.CreateKey(ctx, e.Store, "globex", "test", false); err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{
		Store:     e.Store,
		Engine:    registry.Engine{Engine: e.Engine, Registry: e.Templates}, // creates resolve templates per team
		Builder:   e.Builder,
		Templates: e.Templates,
		Logger:    slog.New(slog.NewTextHandler(e.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range configure {
		f(&cfg)
	}
	e.Server = httptest.NewServer(api.New(cfg).Handler())
	e.URL = e.Server.URL
	t.Cleanup(e.Server.Close)
	return e
}

// SyncBuffer is a bytes.Buffer safe for concurrent use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
