package httpapi

import (
	"github.com/valyala/fasthttp"

	"flashsale/pkg/httperr"
)

// apiError is a refusal with a stable code (pkg/httperr: the body is
// encoded once, so refusing costs no allocation).
type apiError = httperr.Error

func newAPIError(status int, code, message, retryAfter string) apiError {
	return httperr.New(status, code, message).WithRetryAfter(retryAfter)
}

// The refusals of the public API (see docs/design.md).
var (
	errNotFound         = newAPIError(fasthttp.StatusNotFound, httperr.CodeNotFound, "no such sale, item or purchase path", "")
	errBadRequest       = newAPIError(fasthttp.StatusBadRequest, httperr.CodeBadRequest, "malformed request", "")
	errUnauthorized     = newAPIError(fasthttp.StatusUnauthorized, httperr.CodeUnauthorized, "a valid bearer token is required", "")
	errSoldOut          = newAPIError(fasthttp.StatusGone, "SOLD_OUT", "this item is sold out (a shopper who bought it finds her order at GET /api/flash-sales/{saleId}/order)", "")
	errSaleEnded        = newAPIError(fasthttp.StatusGone, "SALE_ENDED", "this sale has ended", "")
	errAlreadyPurchased = newAPIError(fasthttp.StatusConflict, "ALREADY_PURCHASED", "you already hold a unit in this sale", "")
	errUnavailable      = newAPIError(fasthttp.StatusServiceUnavailable, httperr.CodeUnavailable, "temporarily unavailable, retry later", "1")
	errRateLimited      = newAPIError(fasthttp.StatusTooManyRequests, "RATE_LIMITED", "too many requests, slow down", "1")
	errNotAdmitted      = newAPIError(fasthttp.StatusForbidden, "NOT_ADMITTED", "a valid admission token from the queue is required", "")
	errAdmissionUsed    = newAPIError(fasthttp.StatusForbidden, "ADMISSION_USED", "this admission already bought a unit; an admission buys once", "")
	errBadProof         = newAPIError(fasthttp.StatusForbidden, "BAD_PROOF", "solve the queue challenge first", "")
	errTicketExpired    = newAPIError(fasthttp.StatusGone, "TICKET_EXPIRED", "the place was given up after polling stopped; join again", "")
	errMethod           = newAPIError(fasthttp.StatusMethodNotAllowed, httperr.CodeMethod, "method not allowed on this path", "")
	errInternal         = httperr.ErrInternal

	errConfiguredBypass = newAPIError(fasthttp.StatusConflict, "CONFIGURED_BYPASS", "a user of FLASHSALE_QUEUE_BYPASS leaves the list through the configuration (then SIGHUP), not the admin API", "")
)

var contentJSON = []byte("application/json")
