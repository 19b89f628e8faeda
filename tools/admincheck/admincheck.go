// Package admincheck is the test both services run over their admin
// listener's routes: every route under /admin/ must answer a request
// without the credential with pkg/adminauth's one answer, and any other
// route must be one the test names as open, so a new route cannot skip the
// check unnoticed.
package admincheck

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/adminauth"
)

var param = regexp.MustCompile(`\{[^}]+\}`)

// Routes checks routes (method -> paths, as fasthttp/router's List gives
// them) served by h. open lists the routes outside /admin/ meant to need
// no credential, as "METHOD /path".
func Routes(t *testing.T, routes map[string][]string, h fasthttp.RequestHandler, open ...string) {
	t.Helper()
	n := 0
	for method, paths := range routes {
		for _, p := range paths {
			route := method + " " + p
			if !strings.HasPrefix(p, "/admin/") {
				if !slices.Contains(open, route) {
					t.Errorf("%s is outside /admin/ and not listed as open: is it meant to need no credential?", route)
				}
				continue
			}
			n++
			t.Run(route, func(t *testing.T) { refused(t, h, method, param.ReplaceAllString(p, "1")) })
		}
	}
	if n == 0 {
		t.Fatal("no admin route found")
	}
}

// refused sends a request with a wrong bearer token and checks the answer.
func refused(t *testing.T, h fasthttp.RequestHandler, method, uri string) {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI(uri)
	ctx.Request.Header.Set(fasthttp.HeaderAuthorization, "Bearer not-the-token")
	h(&ctx)
	if got := ctx.Response.StatusCode(); got != fasthttp.StatusUnauthorized {
		t.Errorf("status %d, want 401", got)
	}
	if got := string(ctx.Response.Header.Peek(fasthttp.HeaderWWWAuthenticate)); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate %q, want a Bearer challenge", got)
	}
	if got := string(ctx.Response.Body()); got != string(adminauth.Body) {
		t.Errorf("body %s, want %s", got, adminauth.Body)
	}
}
