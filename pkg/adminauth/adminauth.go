// Package adminauth is the operator credential check of every admin
// listener, gateway and order service alike, so they answer alike: a
// request without the bearer token gets 401 with `WWW-Authenticate: Bearer`
// and the project's JSON error body, nothing else.
package adminauth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/httperr"
)

var (
	bearerPrefix = []byte("Bearer ")
	errRefused   = httperr.New(fasthttp.StatusUnauthorized, httperr.CodeUnauthorized, "admin credential required")
	// Body is the answer to a request without the credential.
	Body = errRefused.Body()
)

// Check holds the SHA-256 digest of the admin token: digests of equal
// length are compared, so neither the token nor its length leaks through
// timing. The zero Check refuses everything.
type Check struct {
	digest [sha256.Size]byte
	set    bool
}

// New returns the check of token; an empty token refuses every request.
func New(token []byte) Check {
	if len(token) == 0 {
		return Check{}
	}
	return Check{digest: sha256.Sum256(token), set: true}
}

// OK reports whether the request carries the admin bearer token.
func (c Check) OK(ctx *fasthttp.RequestCtx) bool {
	h := ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)
	if !c.set || !bytes.HasPrefix(h, bearerPrefix) {
		return false
	}
	got := sha256.Sum256(h[len(bearerPrefix):])
	return subtle.ConstantTimeCompare(got[:], c.digest[:]) == 1
}

// Refuse answers 401 with a Bearer challenge and the JSON error body.
func Refuse(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="flashsale-admin"`)
	errRefused.Write(ctx)
}

// Wrap lets only requests with the credential reach next.
func (c Check) Wrap(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if !c.OK(ctx) {
			Refuse(ctx)
			return
		}
		next(ctx)
	}
}
