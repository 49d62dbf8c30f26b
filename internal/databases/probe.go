package databases

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/pgrouter"
)

// probe connects to d through the database router as its tenant (TLS
// verified against the server's CA, SNI naming the database) and runs a
// query, directly and through its pooler at once: what a client will do
// next.
func (s *Service) probe(ctx context.Context, d pandastack.Database, password string) error {
	t0 := time.Now()
	pooled := make(chan error, 1)
	go func() { pooled <- s.probePooler(ctx, d, password, nil) }()
	err := s.probeHost(ctx, pgrouter.Host(d.ID, s.cfg.Domain), d, password)
	tDirect := time.Since(t0)
	perr := <-pooled
	s.log.Debug("database probed", "database", d.ID, "direct_ms", tDirect.Milliseconds(), "ms", time.Since(t0).Milliseconds())
	if err != nil {
		return fmt.Errorf("%s: %w", d.ID, err)
	}
	return perr
}

// probePooler is probe through d's pooler. The pooler looks the password
// up in the database (pgbouncer.AuthQuery), so a refusal is final, unless
// refused is set: then it runs once (a legacy pooler's auth_file
// rewritten), and the probe tries again until PgBouncer, told to read the
// file again without waiting, has.
func (s *Service) probePooler(ctx context.Context, d pandastack.Database, password string, refused func(context.Context, pandastack.Database) error) error {
	t0 := time.Now()
	label := d.ID + PoolerSuffix
	rewritten, deadline := false, time.Time{}
	for try := 1; ; try++ {
		err := s.probeHost(ctx, pgrouter.Host(label, s.cfg.Domain), d, password)
		var pe *pgconn.PgError
		isRefused := errors.As(err, &pe) && (pe.Code == "28P01" || strings.Contains(pe.Message, "authentication failed"))
		if isRefused && refused != nil && !rewritten {
			if rerr := refused(ctx, d); rerr != nil {
				return fmt.Errorf("%s: %w", label, rerr)
			}
			rewritten, deadline = true, time.Now().Add(poolerReload)
			continue
		}
		if err == nil || !isRefused || !rewritten || time.Now().After(deadline) {
			s.log.Debug("database pooler probed", "database", d.ID, "tries", try, "ms", time.Since(t0).Milliseconds())
			if err != nil {
				return fmt.Errorf("%s: %w", label, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// poolerReload bounds how long a probe waits for a legacy PgBouncer to
// read its auth_file again.
const poolerReload = 10 * time.Second

// routerConfig is how a client logs in to d as its tenant with password
// through the database router: TLS verified against the server's CA, SNI
// host naming the database (or its pooler).
func (s *Service) routerConfig(host string, d pandastack.Database, password string) (*pgx.ConnConfig, error) {
	addr, _ := s.router()
	cfg, err := pgx.ParseConfig("sslmode=require")
	if err != nil {
		return nil, fmt.Errorf("router client config: %w", err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = host, 5432, d.User, password, d.DBName
	cfg.Fallbacks = nil
	cfg.TLSConfig = &tls.Config{ServerName: host, RootCAs: s.roots, MinVersion: tls.VersionTLS12}
	cfg.LookupFunc = func(context.Context, string) ([]string, error) { return []string{host}, nil }
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", addr)
	}
	cfg.ConnectTimeout = time.Minute
	return cfg, nil
}

func (s *Service) probeHost(ctx context.Context, host string, d pandastack.Database, password string) error {
	cfg, err := s.routerConfig(host, d, password)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	return nil
}

// goLive is how a created database ends (copies end with goLiveCopy):
// routed, answering a first query through the router with its own
// password (see probe), then marked ready in the store.
func (s *Service) goLive(ctx context.Context, d *pandastack.Database, password string) error {
	if err := s.register(*d); err != nil {
		return err
	}
	if err := s.probe(ctx, *d, password); err != nil {
		return fmt.Errorf("first query through the router: %w", err)
	}
	d.State = pandastack.DatabaseReady
	return s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID)
}

// goLiveCopy is goLive for a copy of another database (a fork's child, a
// point-in-time restore), which holds the original's role and verifier:
// routed, then given its own password through the router's direct route
// as the role itself, with the original's password (rekey: that session
// is the copy's first query through the router), then a query with its
// own password through the pooler. One cold session fewer than rekey and
// then goLive: under TCG each is a few hundred milliseconds of a
// just-restored guest's first code. legacy says the copy may run a pooler
// started before poolers looked their clients up (a fork of a database
// made then): one that refuses the new password checks its auth_file,
// which holds the original's verifier, and gets the copy's there.
func (s *Service) goLiveCopy(ctx context.Context, d *pandastack.Database, oldPassword, password string, legacy bool) error {
	if err := s.register(*d); err != nil {
		return err
	}
	verifier, err := newVerifier(password)
	if err != nil {
		return err
	}
	if err := s.rekey(ctx, *d, oldPassword, verifier); err != nil {
		return err
	}
	var refused func(context.Context, pandastack.Database) error
	if legacy {
		refused = func(ctx context.Context, d pandastack.Database) error {
			s.log.Info("database pooler reads an auth_file: rewriting it", "database", d.ID)
			return s.rekeyInside(ctx, d, verifier, true)
		}
	}
	if err := s.probePooler(ctx, *d, password, refused); err != nil {
		return fmt.Errorf("first query through the router: %w", err)
	}
	d.State = pandastack.DatabaseReady
	return s.cfg.Store.UpdateDatabase(ctx, d.ID, d.State, d.MachineID)
}
