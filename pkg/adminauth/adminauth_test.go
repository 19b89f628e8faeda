package adminauth

import (
	"testing"

	"github.com/valyala/fasthttp"
)

func TestWrap(t *testing.T) {
	const token = "admin-token-0123456789"
	tests := []struct {
		name   string
		token  string // the configured one
		header string // Authorization sent
		want   int
	}{
		{"right token", token, "Bearer " + token, 200},
		{"no header", token, "", 401},
		{"wrong token", token, "Bearer admin-token-0123456780", 401},
		// a prefix of the right token must not pass
		{"prefix of the token", token, "Bearer admin-token", 401},
		{"another scheme", token, "Basic " + token, 401},
		// an unset token refuses everyone, even an empty bearer
		{"no token configured", "", "Bearer ", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := New([]byte(tt.token)).Wrap(func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200) })
			var ctx fasthttp.RequestCtx
			if tt.header != "" {
				ctx.Request.Header.Set(fasthttp.HeaderAuthorization, tt.header)
			}
			h(&ctx)
			if got := ctx.Response.StatusCode(); got != tt.want {
				t.Fatalf("status %d, want %d", got, tt.want)
			}
			if tt.want == 401 {
				if got := string(ctx.Response.Header.Peek(fasthttp.HeaderWWWAuthenticate)); got == "" {
					t.Error("401 without WWW-Authenticate")
				}
				if got := string(ctx.Response.Body()); got != string(Body) {
					t.Errorf("body %s, want %s", got, Body)
				}
			}
		})
	}
}
