package pandastack

import "context"

// BenchFunctionFloor restores the latest version's snapshot of the
// caller's function bare on the server's host (POST /v1/admin/bench/floor
// with a function; admin keys only): the floor a fresh invocation stands
// on, sequential restores one at a time, then parallel at once.
func (c *Client) BenchFunctionFloor(ctx context.Context, function string, sequential, parallel int) (*BenchFloor, error) {
	return c.benchFloor(ctx, map[string]any{"function": function, "sequential": sequential, "parallel": parallel})
}
