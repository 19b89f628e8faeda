package httpapi

import (
	"fmt"
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"flashsale/gateway/internal/ratelimit"
)

// The refusals most of a flash sale's crowd meets cost no allocation: the
// public handler (router, recovery, purchase) as the server calls it, on a
// RequestCtx reused the way fasthttp reuses one between requests. A
// regression here is a garbage-collector cost paid hundreds of thousands of
// times a second, so it fails the suite instead of waiting for someone to
// read a benchmark.
func TestRefusalPathsDoNotAllocate(t *testing.T) {
	a, soldOut, open := timingAPI(t, NewLimits(ratelimit.Rule{}, ratelimit.Rule{}, 64))
	limited, _, _ := timingAPI(t, NewLimits(ratelimit.Rule{}, ratelimit.Rule{Rate: 1e-9, Burst: 1}, 64))
	h, hLimited := a.Public(), limited.Public()
	tests := []struct {
		name    string
		handler fasthttp.RequestHandler
		path    string
		authz   string
		want    int
	}{
		// the path most of the crowd takes once an item is sold out
		{"sold-out flag 410", h, soldOut.purchasePath(soldOut.gate), "", 410},
		// a guessed or early purchase URL
		{"wrong gate 404", h, soldOut.purchasePath("0123456789abcdef0123456789abcdef"), "", 404},
		{"unknown sale 404", h, fmt.Sprintf("/api/flash-sales/%d/g/%s/items/1/purchase", int64(1)<<62, soldOut.gate), "", 404},
		// stock left, no or a malformed token
		{"no token 401", h, open.purchasePath(open.gate), "", 401},
		{"malformed token 401", h, open.purchasePath(open.gate), "Basic dXNlcjpwYXNz", 401},
		// the per-IP limit spent
		{"ip rate limited 429", hLimited, open.purchasePath(open.gate), "", 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
			ctx.Request.SetRequestURI(tt.path)
			ctx.Request.Header.SetMethod(fasthttp.MethodPost)
			if tt.authz != "" {
				ctx.Request.Header.Set(fasthttp.HeaderAuthorization, tt.authz)
			}
			tt.handler(&ctx) // lazily built router state, the limiter's bucket
			allocs := testing.AllocsPerRun(200, func() {
				ctx.ResetUserValues()
				ctx.Response.Reset()
				tt.handler(&ctx)
			})
			if got := ctx.Response.StatusCode(); got != tt.want {
				t.Fatalf("status %d, want %d: %s", got, tt.want, ctx.Response.Body())
			}
			if allocs != 0 {
				t.Errorf("%v allocations per request, want 0", allocs)
			}
		})
	}
}
