package httpapi

import "testing"

// The refusals most of a flash sale's crowd meets cost no allocation: the
// public handler (router, recovery, purchase) as the server calls it, on a
// RequestCtx reused the way fasthttp reuses one between requests. A
// regression here is a garbage-collector cost paid hundreds of thousands of
// times a second, so it fails the suite instead of waiting for someone to
// read a benchmark.
func TestRefusalPathsDoNotAllocate(t *testing.T) {
	for _, c := range refusalCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ctx, serve := c.prepared()
			allocs := testing.AllocsPerRun(200, serve)
			if got := ctx.Response.StatusCode(); got != c.want {
				t.Fatalf("status %d, want %d: %s", got, c.want, ctx.Response.Body())
			}
			if allocs != 0 {
				t.Errorf("%v allocations per request, want 0", allocs)
			}
		})
	}
}
