// Package api is ordersvc's HTTP surface on fasthttp: the shoppers' order
// endpoint on the public listener, the operators' endpoints on the admin
// listener, and health, readiness and metrics on both. Every error is JSON
// {"error":"CODE","message":"..."} (pkg/httperr); the listeners' Recover
// (pkg/httpserver) keeps a panic from reaching a client.
package api

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"flashsale/pkg/httperr"
)

// Error codes.
const (
	CodeNotFound       = httperr.CodeNotFound
	CodeBadRequest     = httperr.CodeBadRequest
	CodeInvalidOrderID = httperr.CodeInvalidOrderID
	CodeUnauthorized   = httperr.CodeUnauthorized
	CodeUnavailable    = httperr.CodeUnavailable
	CodeInternal       = httperr.CodeInternal
	CodeMethod         = httperr.CodeMethod
	CodeBusy           = "BUSY"
	// CodeConsumerLagging: stock was not computed because the order
	// consumer had not caught up with the orders topic; retry later.
	CodeConsumerLagging = "CONSUMER_LAGGING"
	// CodeSaleLive: load-stock of an open sale whose stock is loaded; it
	// would drop the reservations in flight (force=true loads anyway).
	CodeSaleLive = "SALE_LIVE"
	// CodeKeyReused: create-sale with an idempotency key that already made
	// a sale from another request.
	CodeKeyReused = "IDEMPOTENCY_KEY_REUSED"
)

// Refusals are encoded once (pkg/httperr), so answering them allocates
// nothing.
var (
	errUnauthorized   = httperr.New(fasthttp.StatusUnauthorized, CodeUnauthorized, "missing or invalid bearer token")
	errInvalidOrderID = httperr.InvalidOrderID
	errNotFound       = httperr.New(fasthttp.StatusNotFound, CodeNotFound, "no such resource")
	errUnavailable    = httperr.New(fasthttp.StatusServiceUnavailable, CodeUnavailable, "temporarily unavailable, retry later").WithRetryAfter("1")
	errMethod         = httperr.New(fasthttp.StatusMethodNotAllowed, CodeMethod, "method not allowed")
)

const contentJSON = "application/json"

func writeRaw(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType(contentJSON)
	ctx.SetBody(body)
}

func writeError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	httperr.Write(ctx, status, code, msg)
}

func writeUnauthorized(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer`)
	errUnauthorized.Write(ctx)
}

func writeUnavailable(ctx *fasthttp.RequestCtx) { errUnavailable.Write(ctx) }

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httperr.ErrInternal.Write(ctx)
		return
	}
	writeRaw(ctx, status, b)
}

func notFound(ctx *fasthttp.RequestCtx) { errNotFound.Write(ctx) }

func methodNotAllowed(ctx *fasthttp.RequestCtx) { errMethod.Write(ctx) }
