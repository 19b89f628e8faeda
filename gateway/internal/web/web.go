// Package web serves the shopper's sale page and the operator's dashboard:
// static files embedded in the binary (a CDN can serve the same files, they
// only talk to the public JSON API) and the one JSON view the dashboard
// polls, which aggregates what the gateway knows so the page never parses
// Prometheus text.
package web

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/httperr"
)

//go:embed static
var static embed.FS

// Path prefixes of the pages: /sale/ on the public listener, /dashboard/ on
// the admin listener, and the dashboard's JSON beside the other admin calls.
const (
	SalePrefix      = "/sale/"
	DashboardPrefix = "/dashboard/"
	StatePath       = "/admin/dashboard"
)

// file is one embedded file, ready to write.
type file struct {
	body        []byte
	contentType string
}

// site is the set of files one page needs, by the name under its prefix.
type site map[string]file

func load(index string, names ...string) (site, error) {
	s := site{}
	for _, n := range append(names, index) {
		b, err := fs.ReadFile(static, "static/"+n)
		if err != nil {
			return nil, err
		}
		ct := mime.TypeByExtension(path.Ext(n))
		if ct == "" {
			ct = "application/octet-stream"
		}
		s[n] = file{body: b, contentType: ct}
	}
	s[""] = s[index]
	return s, nil
}

// csp keeps the pages to their own origin: no CDN, no inline script.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"

// serve writes the file named by the rest of the path after prefix, or
// reports false when the path is not the site's.
func (s site) serve(ctx *fasthttp.RequestCtx, prefix string) bool {
	p := ctx.Path()
	if string(p) == strings.TrimSuffix(prefix, "/") {
		// A relative Location, with the query: fasthttp's Redirect made it
		// absolute from the request's scheme, which behind a TLS-ending
		// balancer is http (the token in the fragment, which browsers
		// carry across a redirect, went to a plain-http page), and dropped
		// the query (?sale=7 landed on sale 1).
		loc := prefix
		if q := ctx.URI().QueryString(); len(q) > 0 {
			loc += "?" + string(q)
		}
		ctx.Response.Header.Set(fasthttp.HeaderLocation, loc)
		ctx.SetStatusCode(fasthttp.StatusFound)
		return true
	}
	if !bytes.HasPrefix(p, []byte(prefix)) {
		return false
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set(fasthttp.HeaderAllow, "GET, HEAD")
		httperr.Write(ctx, fasthttp.StatusMethodNotAllowed, httperr.CodeMethod, "GET only")
		return true
	}
	f, ok := s[string(p[len(prefix):])]
	if !ok {
		httperr.Write(ctx, fasthttp.StatusNotFound, httperr.CodeNotFound, "no such page")
		return true
	}
	h := &ctx.Response.Header
	h.SetContentType(f.contentType)
	// The files change only with the binary; revalidating is cheap and a
	// stale script talking to a newer API is not.
	h.Set(fasthttp.HeaderCacheControl, "no-cache")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	ctx.SetBody(f.body)
	return true
}

// SalePage wraps the public handler: /sale/ serves the shopper's page,
// every other path goes to next untouched.
func SalePage(next fasthttp.RequestHandler) (fasthttp.RequestHandler, error) {
	s, err := load("sale.html", "sale.js", "style.css")
	if err != nil {
		return nil, err
	}
	return func(ctx *fasthttp.RequestCtx) {
		if !s.serve(ctx, SalePrefix) {
			next(ctx)
		}
	}, nil
}
