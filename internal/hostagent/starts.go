package hostagent

import (
	"sync"

	"github.com/pandastack/pandastack"
)

// starts admits the operations that may start a VM (create, fork, wake,
// adopt) until the agent closes: Close shuts it, then waits for those in
// flight, so that every VM they start is in the agent's table when Close
// ends the machines. Without it a create that raced a shutdown (a backup
// verification, an invocation) left its VM, namespace and tap running
// after the server had gone.
type starts struct {
	mu       sync.Mutex
	closed   bool
	inFlight sync.WaitGroup
}

// begin admits one operation; the caller calls end when it is done. Once
// the agent closes it refuses, with EUnavailable. Operations may nest.
func (g *starts) begin() (end func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "the host is shutting down")
	}
	g.inFlight.Add(1)
	return g.inFlight.Done, nil
}

// close refuses every new operation and waits for those in flight.
func (g *starts) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.inFlight.Wait()
}
