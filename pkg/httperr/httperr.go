// Package httperr is the one error body of every flashsale HTTP API, the
// gateway's and the order service's alike:
//
//	{"error":"CODE","message":"what happened"}
//
// A refusal that is answered often is an Error, encoded once, so answering
// it allocates nothing; Write encodes a body on the spot for the rare
// answers whose message is not fixed.
package httperr

import (
	"encoding/json"
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

// Codes both services answer with.
const (
	CodeBadRequest      = "BAD_REQUEST"
	CodeUnauthorized    = "UNAUTHORIZED"
	CodeNotFound        = "NOT_FOUND"
	CodeMethod          = "METHOD_NOT_ALLOWED"
	CodeTooLarge        = "PAYLOAD_TOO_LARGE"
	CodeHeadersTooLarge = "HEADERS_TOO_LARGE"
	CodeTimeout         = "REQUEST_TIMEOUT"
	CodeInternal        = "INTERNAL"
	CodeUnavailable     = "UNAVAILABLE"
	// CodeInvalidOrderID: an order id that is not a canonical UUID, from
	// the order service or from the gateway's proxy in front of it.
	CodeInvalidOrderID = "INVALID_ORDER_ID"
)

var contentJSON = []byte("application/json")

// Error is a refusal with its status and encoded body.
type Error struct {
	Status  int
	Code    string
	Message string
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter string
	body       []byte
}

// InvalidOrderID is the one answer to a malformed order id, the same
// whichever service gives it.
var InvalidOrderID = New(fasthttp.StatusBadRequest, CodeInvalidOrderID, "order id is not a UUID")

// New encodes the refusal's body once.
func New(status int, code, message string) Error {
	return Error{Status: status, Code: code, Message: message, body: Body(code, message)}
}

// WithRetryAfter returns e answering with a Retry-After header.
func (e Error) WithRetryAfter(seconds string) Error {
	e.RetryAfter = seconds
	return e
}

// Body is the encoded {"error","message"} document.
func Body(code, message string) []byte {
	b, _ := json.Marshal(body{Error: code, Message: message}) // two strings always encode
	return b
}

type body struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// OrderID names the order a refusal concerns (the gateway's purchase).
	OrderID string `json:"orderId,omitempty"`
}

// Body returns e's encoded body (the same slice every time: do not modify).
func (e Error) Body() []byte { return e.body }

// Write answers the request with e: status, JSON content type, body and
// Retry-After when set. It does not allocate.
func (e Error) Write(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentJSON)
	ctx.SetStatusCode(e.Status)
	if e.RetryAfter != "" {
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, e.RetryAfter)
	}
	ctx.SetBody(e.body)
}

// WriteOrder answers with e and the id of the order it concerns, as
// {"error","message","orderId"} (a rare path: it allocates).
func (e Error) WriteOrder(ctx *fasthttp.RequestCtx, orderID string) {
	e.Write(ctx)
	b, _ := json.Marshal(body{Error: e.Code, Message: e.Message, OrderID: orderID})
	ctx.SetBody(b)
}

// Write answers with a refusal whose message is built for this request.
func Write(ctx *fasthttp.RequestCtx, status int, code, message string) {
	Error{Status: status, body: Body(code, message)}.Write(ctx)
}

// The refusals of requests fasthttp could not read, and of a handler that
// panicked.
var (
	ErrBadRequest      = New(fasthttp.StatusBadRequest, CodeBadRequest, "malformed request")
	ErrTooLarge        = New(fasthttp.StatusRequestEntityTooLarge, CodeTooLarge, "request body too large")
	ErrHeadersTooLarge = New(fasthttp.StatusRequestHeaderFieldsTooLarge, CodeHeadersTooLarge, "request headers too large")
	ErrTimeout         = New(fasthttp.StatusRequestTimeout, CodeTimeout, "request not received in time")
	ErrInternal        = New(fasthttp.StatusInternalServerError, CodeInternal, "internal error")
)

// ParseError is a fasthttp.Server ErrorHandler: it answers requests
// fasthttp could not read in the same JSON shape as every other refusal
// (fasthttp's default is plain text).
func ParseError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		ErrTooLarge.Write(ctx)
	case errors.As(err, &small):
		ErrHeadersTooLarge.Write(ctx)
	case errors.As(err, &netErr) && netErr.Timeout():
		ErrTimeout.Write(ctx)
	default:
		ErrBadRequest.Write(ctx)
	}
}
