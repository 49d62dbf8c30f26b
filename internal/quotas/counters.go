package quotas

import "slices"

// AddCounter adds c to the Counters usage is counted with, for a service
// made after its Service (app hosting counts its build caches and git
// repositories so).
func (s *Service) AddCounter(c Counter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Counters = append(s.cfg.Counters, c)
}

// counters is a copy of the Counters, safe against AddCounter.
func (s *Service) counters() []Counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cfg.Counters)
}
