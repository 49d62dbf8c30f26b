package pandastack

import "context"

// BenchFunctionFloor restores the latest version's snapshot of the
// caller's function bare on the server's host (POST /v1/admin/bench/floor
// with a function; admin keys only): the floor a fresh invocation stands
// on, sequential restores one at a time, then parallel at once.
func (c *Client) BenchFunctionFloor(ctx context.Context, function string, sequential, parallel int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"function": function, "sequential": sequential, "parallel": parallel})
}

// BenchFunctionAnswerFloor is BenchFunctionFloor with each restore timed
// until the guest's agent answered a hello: the least a fresh invocation
// needs (the guest must at least answer once, after the reseed every
// clone gets before any of its code runs). Its LoadP50Ms is a restore
// into a process prepared ahead, as an invocation's is.
func (c *Client) BenchFunctionAnswerFloor(ctx context.Context, function string, sequential, parallel int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"function": function, "sequential": sequential, "parallel": parallel, "answer": true})
}

// BenchFunctionShimFloor is BenchFunctionFloor with each restore timed
// until the function's shim answered a ping on the VM's direct port, no
// agent greeted: what any fresh invocation of the function needs at least
// (its VM restored, its runtime woken by a line and answering one). Its
// LoadP50Ms is a restore into a process prepared ahead.
func (c *Client) BenchFunctionShimFloor(ctx context.Context, function string, sequential, parallel int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"function": function, "sequential": sequential, "parallel": parallel, "shim": true})
}
