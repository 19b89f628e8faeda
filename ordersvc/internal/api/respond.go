// Package api is ordersvc's HTTP surface on fasthttp: the shoppers' order
// endpoint on the public listener, the operators' endpoints on the admin
// listener, and health, readiness and metrics on both. Every error is JSON
// {"error":"CODE","message":"..."}; no panic reaches a client.
package api

import (
	"encoding/json"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// Error codes.
const (
	CodeNotFound       = "NOT_FOUND"
	CodeBadRequest     = "BAD_REQUEST"
	CodeInvalidOrderID = "INVALID_ORDER_ID"
	CodeUnauthorized   = "UNAUTHORIZED"
	CodeUnavailable    = "UNAVAILABLE"
	CodeInternal       = "INTERNAL"
	CodeMethod         = "METHOD_NOT_ALLOWED"
	CodeBusy           = "BUSY"
	// CodeConsumerLagging: stock was not computed because the order
	// consumer had not caught up with the orders topic; retry later.
	CodeConsumerLagging = "CONSUMER_LAGGING"
)

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func errorJSON(code, msg string) []byte {
	b, _ := json.Marshal(errorBody{Error: code, Message: msg}) // two strings always encode
	return b
}

// Refusals are encoded once, so answering them allocates nothing.
var (
	bodyUnauthorized   = errorJSON(CodeUnauthorized, "missing or invalid bearer token")
	bodyInvalidOrderID = errorJSON(CodeInvalidOrderID, "order id is not a UUID")
	bodyNotFound       = errorJSON(CodeNotFound, "no such resource")
	bodyUnavailable    = errorJSON(CodeUnavailable, "temporarily unavailable, retry later")
	bodyInternal       = errorJSON(CodeInternal, "internal error")
	bodyMethod         = errorJSON(CodeMethod, "method not allowed")
)

const contentJSON = "application/json"

func writeRaw(ctx *fasthttp.RequestCtx, status int, body []byte) {
	ctx.SetStatusCode(status)
	ctx.SetContentType(contentJSON)
	ctx.SetBody(body)
}

func writeError(ctx *fasthttp.RequestCtx, status int, code, msg string) {
	writeRaw(ctx, status, errorJSON(code, msg))
}

func writeUnauthorized(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("WWW-Authenticate", `Bearer`)
	writeRaw(ctx, fasthttp.StatusUnauthorized, bodyUnauthorized)
}

func writeUnavailable(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Retry-After", "1")
	writeRaw(ctx, fasthttp.StatusServiceUnavailable, bodyUnavailable)
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeRaw(ctx, fasthttp.StatusInternalServerError, bodyInternal)
		return
	}
	writeRaw(ctx, status, b)
}

// Recover turns a panic into a logged 500 JSON answer, counted in panics.
func Recover(log *slog.Logger, panics prometheus.Counter, next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		defer func() {
			if r := recover(); r != nil {
				panics.Inc()
				log.Error("handler panic", "panic", r, "path", string(ctx.Path()), "stack", string(debug.Stack()))
				ctx.ResetBody()
				writeRaw(ctx, fasthttp.StatusInternalServerError, bodyInternal)
			}
		}()
		next(ctx)
	}
}

func notFound(ctx *fasthttp.RequestCtx) { writeRaw(ctx, fasthttp.StatusNotFound, bodyNotFound) }

func methodNotAllowed(ctx *fasthttp.RequestCtx) {
	writeRaw(ctx, fasthttp.StatusMethodNotAllowed, bodyMethod)
}
