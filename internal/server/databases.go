package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/pandastack/pandastack/internal/databases"
	"github.com/pandastack/pandastack/internal/pgrouter"
	"github.com/pandastack/pandastack/internal/router"
	"github.com/pandastack/pandastack/internal/sandboxes"
	"github.com/pandastack/pandastack/internal/sqlhttp"
	"github.com/pandastack/pandastack/internal/templates/registry"
)

// dbDomain is the parent of databases' host names: --db-domain, else
// db.DOMAIN.
func (s *Server) dbDomain() string {
	if s.cfg.DBDomain != "" {
		return router.NormalizeHost(s.cfg.DBDomain)
	}
	return "db." + s.domain()
}

// openDatabases makes the databases service and routes the databases the
// store holds (their machines were re-attached by the engine's start).
func (s *Server) openDatabases(ctx context.Context) error {
	if d := s.dbDomain(); s.cfg.DBListen != "" && d != s.domain() && !strings.HasSuffix(d, "."+s.domain()) {
		return fmt.Errorf("--db-domain %s must be under --sandbox-domain %s (the server's CA issues for that domain)", d, s.domain())
	}
	backup, err := s.databaseBackupConfig()
	if err != nil {
		return err
	}
	s.databases = databases.New(databases.Config{Store: s.store, Backup: backup,
		Sandboxes: sandboxes.New(sandboxes.Config{Store: s.store, Engine: registry.Engine{Engine: s.engine, Registry: s.registry},
			Logger: s.log, Quotas: s.quotas}),
		Engine: s.engine, Forks: s.engine, Volumes: s.engine, Bases: s.engine, Quotas: s.quotas, Secrets: s.secrets, Routes: s.routes, Domain: s.dbDomain(),
		CACert: s.caPEM(), Logger: s.log.With("service", "databases"),
		Ports: s.portDialer(s.engine, "databases"), NICs: s.nics()})
	return s.databases.Start(ctx)
}

// sqlHandler serves SQL over HTTP (POST /sql) for the databases; the
// databases service ends its pooled sessions to a database deleted,
// hibernated or restarted.
func (s *Server) sqlHandler() http.Handler {
	h := sqlhttp.New(sqlhttp.Config{Table: s.routes, Domain: s.dbDomain(), Logger: s.log.With("service", "sql over http")})
	if s.databases != nil {
		s.databases.OnSessionsEnd(h.ClosePools)
	}
	return h
}

// serveDatabases runs the database router on --db-listen. It returns a
// stop function.
func (s *Server) serveDatabases() (addr string, stop func(), err error) {
	if s.ca == nil {
		return "", nil, fmt.Errorf("--db-listen needs the server's CA (DATA/ca)")
	}
	ln, err := net.Listen("tcp", s.cfg.DBListen)
	if err != nil {
		return "", nil, fmt.Errorf("listen --db-listen: %w", err)
	}
	l := pgrouter.New(router.LimitPerClient(ln, s.dbMaxConnsPerClient()), pgrouter.Config{Table: s.routes, Domain: s.dbDomain(),
		Certs: s.ca, Logger: s.log.With("service", "database router")})
	go func() {
		if err := l.Serve(); err != nil {
			s.log.Error("database router stopped", "err", err)
		}
	}()
	addr = ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	var p int
	fmt.Sscan(port, &p)
	s.databases.SetRouter(addr, p)
	return addr, func() { _ = l.Close() }, nil
}

// nics is the network manager as the databases service's NICs, nil when
// the server runs no sandbox networking (a nil *network.Manager must not
// become a non-nil interface).
func (s *Server) nics() databases.NICs {
	if s.net == nil {
		return nil
	}
	return s.net
}
