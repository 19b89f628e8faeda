package httpapi

import (
	"encoding/json"
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

// apiError is a refusal with a stable code; its body is built once so that
// refusing costs no allocation.
type apiError struct {
	status        int
	code, message string
	body          []byte
	retryAfter    string
}

func newAPIError(status int, code, message, retryAfter string) apiError {
	b, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{code, message})
	return apiError{status: status, code: code, message: message, body: b, retryAfter: retryAfter}
}

// The refusals of the public API (see docs/design.md).
var (
	errNotFound         = newAPIError(fasthttp.StatusNotFound, "NOT_FOUND", "no such sale, item or purchase path", "")
	errBadRequest       = newAPIError(fasthttp.StatusBadRequest, "BAD_REQUEST", "malformed request", "")
	errUnauthorized     = newAPIError(fasthttp.StatusUnauthorized, "UNAUTHORIZED", "a valid bearer token is required", "")
	errSoldOut          = newAPIError(fasthttp.StatusGone, "SOLD_OUT", "this item is sold out", "")
	errSaleEnded        = newAPIError(fasthttp.StatusGone, "SALE_ENDED", "this sale has ended", "")
	errAlreadyPurchased = newAPIError(fasthttp.StatusConflict, "ALREADY_PURCHASED", "you already hold a unit in this sale", "")
	errUnavailable      = newAPIError(fasthttp.StatusServiceUnavailable, "UNAVAILABLE", "temporarily unavailable, retry later", "1")
	errRateLimited      = newAPIError(fasthttp.StatusTooManyRequests, "RATE_LIMITED", "too many requests, slow down", "1")
	errNotAdmitted      = newAPIError(fasthttp.StatusForbidden, "NOT_ADMITTED", "a valid admission token from the queue is required", "")
	errBadProof         = newAPIError(fasthttp.StatusForbidden, "BAD_PROOF", "solve the queue challenge first", "")
	errTicketExpired    = newAPIError(fasthttp.StatusGone, "TICKET_EXPIRED", "the place was given up after polling stopped; join again", "")
	errMethod           = newAPIError(fasthttp.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "method not allowed on this path", "")
	errInternal         = newAPIError(fasthttp.StatusInternalServerError, "INTERNAL", "internal error", "")
)

var contentJSON = []byte("application/json")

func (e apiError) write(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentJSON)
	ctx.SetStatusCode(e.status)
	if e.retryAfter != "" {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, e.retryAfter)
	}
	ctx.SetBody(e.body)
}

// writeOrder writes e with the order id it concerns (a rare path: it
// allocates).
func (e apiError) writeOrder(ctx *fasthttp.RequestCtx, orderID string) {
	e.write(ctx)
	b, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
		OrderID string `json:"orderId"`
	}{e.code, e.message, orderID})
	ctx.SetBody(b)
}

var (
	errTooLarge       = newAPIError(fasthttp.StatusRequestEntityTooLarge, "PAYLOAD_TOO_LARGE", "request body too large", "")
	errHeaderTooLarge = newAPIError(fasthttp.StatusRequestHeaderFieldsTooLarge, "HEADERS_TOO_LARGE", "request headers too large", "")
	errTimeout        = newAPIError(fasthttp.StatusRequestTimeout, "REQUEST_TIMEOUT", "request not received in time", "")
)

// ParseError answers requests fasthttp could not read, in the same JSON
// shape as every other refusal (its default is plain text).
func ParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		errTooLarge.write(ctx)
	case errors.As(err, &small):
		errHeaderTooLarge.write(ctx)
	case errors.As(err, &netErr) && netErr.Timeout():
		errTimeout.write(ctx)
	default:
		errBadRequest.write(ctx)
	}
}
