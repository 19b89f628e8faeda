package httpapi

import "testing"

// The refusals most of a flash sale's crowd meets cost no allocation: the
// public handler (router, recovery, purchase) as the server calls it, on a
// RequestCtx reused the way fasthttp reuses one between requests. A
// regression here is a garbage-collector cost paid hundreds of thousands of
// times a second, so it fails the suite instead of waiting for someone to
// read a benchmark. Each refusal is counted on the way (a client_golang
// counter child created at start), and the count is checked too: the
// zero covers the metrics, not a path that skipped them.
func TestRefusalPathsDoNotAllocate(t *testing.T) {
	const runs = 200
	for _, c := range refusalCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ctx, serve := c.prepared()
			before := c.metrics.Purchases(c.outcome)
			allocs := testing.AllocsPerRun(runs, serve)
			if got := ctx.Response.StatusCode(); got != c.want {
				t.Fatalf("status %d, want %d: %s", got, c.want, ctx.Response.Body())
			}
			if allocs != 0 {
				t.Errorf("%v allocations per request, want 0", allocs)
			}
			// AllocsPerRun calls once more to warm up.
			if got := c.metrics.Purchases(c.outcome) - before; got != runs+1 {
				t.Errorf("purchases_total{outcome=%q} moved by %d over %d requests", c.outcome, got, runs+1)
			}
		})
	}
}
