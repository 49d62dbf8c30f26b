package databases

// Other services may keep sessions open to a database for its tenant
// (SQL over HTTP's pools, internal/sqlhttp). They end when the database
// is deleted, hibernated or restarted on a new machine: the service tells
// them with the database's id.

// OnSessionsEnd registers fn, called with a database's id when the
// sessions kept to it must end (sqlhttp.Handler.ClosePools).
func (s *Service) OnSessionsEnd(fn func(id string)) {
	s.mu.Lock()
	s.sessionsEnd = append(s.sessionsEnd, fn)
	s.mu.Unlock()
}

// endSessions tells every OnSessionsEnd function that database id's
// sessions end.
func (s *Service) endSessions(id string) {
	s.mu.Lock()
	fns := s.sessionsEnd
	s.mu.Unlock()
	for _, fn := range fns {
		fn(id)
	}
}
