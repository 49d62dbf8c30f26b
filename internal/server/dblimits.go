package server

// DefaultDBMaxConnsPerClient caps the connections one client address holds
// at once on the database router. It is higher than the other listeners'
// cap (DefaultMaxConnsPerClient): a database's clients commonly all come
// from one address — an app server's connection pools, functions behind
// one NAT — and a pooled database takes 1,000 idle clients and more
// (pgbouncer.MaxClients); 256 refused the 257th with a reset.
const DefaultDBMaxConnsPerClient = 4096

// dbMaxConnsPerClient is the database router's cap per client address (0:
// none).
func (s *Server) dbMaxConnsPerClient() int {
	switch {
	case s.cfg.DBMaxConnsPerClient < 0:
		return 0
	case s.cfg.DBMaxConnsPerClient == 0:
		return DefaultDBMaxConnsPerClient
	}
	return s.cfg.DBMaxConnsPerClient
}
