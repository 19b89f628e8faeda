package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"flashsale/ordersvc/internal/api"
	"flashsale/ordersvc/internal/metrics"
	"flashsale/ordersvc/internal/store"
	"flashsale/pkg/auth"
)

// The refusals of the public order endpoint must cost no allocation.
func BenchmarkGetOrderRefusals(b *testing.B) {
	v, err := auth.NewVerifier(jwtKey, nil, "flashsale", "")
	if err != nil {
		b.Fatal(err)
	}
	tok, err := auth.MintHS256(jwtKey, "alice", "flashsale", "", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	// The refusals below never reach PostgreSQL.
	st := store.New(nil)
	h := api.NewPublic(st, nil, nil, v, api.NewHealth(st, metrics.New(), nil), quiet).Handler(context.Background())
	cases := []struct {
		name, path, authz string
		want              int
	}{
		{"no token", "/api/flash-sales/orders/0190f5a2-7c4e-7b1a-9f00-1234567890ab", "", 401},
		{"malformed id", "/api/flash-sales/orders/nope", "Bearer " + tok, 400},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI(c.path)
			ctx.Request.Header.SetMethod("GET")
			if c.authz != "" {
				ctx.Request.Header.Set("Authorization", c.authz)
			}
			b.ReportAllocs()
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
				if ctx.Response.StatusCode() != c.want {
					b.Fatalf("status %d, want %d", ctx.Response.StatusCode(), c.want)
				}
			}
		})
	}
}
