package httperr

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/valyala/fasthttp"
)

func decode(t *testing.T, b []byte) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return m
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name       string
		write      func(*fasthttp.RequestCtx)
		status     int
		want       map[string]string
		retryAfter string
	}{
		{"prebuilt", New(404, "NOT_FOUND", "no such sale").Write, 404,
			map[string]string{"error": "NOT_FOUND", "message": "no such sale"}, ""},
		{"retry after", New(503, "UNAVAILABLE", "later").WithRetryAfter("1").Write, 503,
			map[string]string{"error": "UNAVAILABLE", "message": "later"}, "1"},
		// a message with quotes is escaped, not spliced into the JSON
		{"built on the spot", func(c *fasthttp.RequestCtx) { Write(c, 400, "BAD_REQUEST", `field "name": empty`) }, 400,
			map[string]string{"error": "BAD_REQUEST", "message": `field "name": empty`}, ""},
		{"with an order", func(c *fasthttp.RequestCtx) { New(409, "ALREADY_PURCHASED", "yours").WriteOrder(c, "0190-abc") }, 409,
			map[string]string{"error": "ALREADY_PURCHASED", "message": "yours", "orderId": "0190-abc"}, ""},
		{"body too large", func(c *fasthttp.RequestCtx) { ParseError(c, fasthttp.ErrBodyTooLarge) }, 413,
			map[string]string{"error": CodeTooLarge, "message": "request body too large"}, ""},
		{"header too large", func(c *fasthttp.RequestCtx) { ParseError(c, &fasthttp.ErrSmallBuffer{}) }, 431,
			map[string]string{"error": CodeHeadersTooLarge, "message": "request headers too large"}, ""},
		{"garbage", func(c *fasthttp.RequestCtx) { ParseError(c, errors.New("cannot parse")) }, 400,
			map[string]string{"error": CodeBadRequest, "message": "malformed request"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			tt.write(&ctx)
			if got := ctx.Response.StatusCode(); got != tt.status {
				t.Errorf("status %d, want %d", got, tt.status)
			}
			if got := string(ctx.Response.Header.ContentType()); got != "application/json" {
				t.Errorf("content type %q", got)
			}
			got := decode(t, ctx.Response.Body())
			if len(got) != len(tt.want) {
				t.Errorf("body %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if got := string(ctx.Response.Header.Peek(fasthttp.HeaderRetryAfter)); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

// A prebuilt refusal costs no allocation.
func TestWriteAllocs(t *testing.T) {
	e := New(429, "RATE_LIMITED", "slow down").WithRetryAfter("1")
	var ctx fasthttp.RequestCtx
	e.Write(&ctx) // the header's storage is sized on the first use
	if n := testing.AllocsPerRun(100, func() { ctx.Response.Reset(); e.Write(&ctx) }); n != 0 {
		t.Errorf("%v allocations per Write, want 0", n)
	}
}
